"""The real Azure ML service's recorded answers the loopback's asset routes reproduce, by name.

Paths under ``python/sdk/ml/azure-ai-ml/tests/recordings/`` of the public repository
Azure/azure-sdk-assets (azure-ai-ml's own end-to-end recordings). Only names live here: the
facts each answer must keep are in ``tests/backends/azure/test_conformance_assets.py``.
"""
from __future__ import annotations

REPOSITORY = "Azure/azure-sdk-assets"
FOLDER = "python/sdk/ml/azure-ai-ml/tests/recordings/"
#: an environment by label: the versions list, newest first, ``$top=1``; ``condaFile`` as JSON
ENVIRONMENT_LATEST = ("environment/e2etests/test_environment.pyTestEnvironment"
                      "test_environment_get_latest_label.json")
#: a model registered and fetched; its versions list 404 ``ModelNotFound`` before it exists;
#: the workspace blob store and ``listSecrets`` answering a SAS token
MODEL_CRUD = "model/e2etests/test_model.pyTestModeltest_crud_file.json"
#: a model by label: the versions list, newest first, ``$top=1``
MODEL_LATEST = "model/e2etests/test_model.pyTestModeltest_models_get_latest_label.json"
#: a component by label: the versions list, newest first, ``$top=1``
COMPONENT_LATEST = ("component/e2etests/test_component.pyTestComponent"
                    "test_command_component_get_latest_label.json")
#: a compute cluster read back (``GET computes/NAME``)
COMPUTE = "compute/e2etests/test_compute.pyTestComputetest_aml_compute_create_and_delete.json"
#: a registry environment, created and read through the registry's own endpoint
REGISTRY_ENVIRONMENT = ("environment/e2etests/test_environment.pyTestEnvironment"
                        "test_registry_environment_create_conda_and_get.json")


def url(name: str) -> str:
    """Where recording ``name`` can be read."""
    return f"https://github.com/{REPOSITORY}/blob/main/{FOLDER}{name}"


__all__ = ["COMPONENT_LATEST", "COMPUTE", "ENVIRONMENT_LATEST", "FOLDER", "MODEL_CRUD",
           "MODEL_LATEST", "REGISTRY_ENVIRONMENT", "REPOSITORY", "url"]
