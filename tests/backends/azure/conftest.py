import logging
import warnings

import pytest


@pytest.fixture(autouse=True)
def _quiet_azure_ai_ml():
    logging.getLogger("azure.ai.ml").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", module=r"azure\.ai\.ml.*")
    yield
from mlflow_server import mlflow_server  # noqa: F401,E402  (a real tracking server, per session)
