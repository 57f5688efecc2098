import logging
import warnings

import pytest


@pytest.fixture(autouse=True)
def _quiet_azure_ai_ml():
    logging.getLogger("azure.ai.ml").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", module=r"azure\.ai\.ml.*")
    yield


@pytest.fixture
def service(azureml):
    """The real MLClientService (and MLClient) on the loopback workspace."""
    from mlpipe.backends.azure.service import MLClientService
    from mlpipe.backends.azure.workspace import Workspace

    ws = Workspace(azureml.subscription_id, azureml.resource_group, azureml.workspace_name)
    return MLClientService(ws, credential=azureml.credential())


@pytest.fixture
def project_spec(azureml_project):
    """The spec of a pipeline of the loopback project: ``project_spec("flat")``."""
    from mlpipe.loader import load_spec

    def load(name="flat"):
        spec, found = load_spec(f"{azureml_project / 'lbflow.py'}:{name}")
        assert not found
        return spec

    return load


from mlflow_server import mlflow_server  # noqa: E402,F401  (a real tracking server)
