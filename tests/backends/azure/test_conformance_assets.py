"""The loopback's asset routes held against the real Azure ML service's recorded answers.

Each fact below is ours: the few things one recorded answer shows (status, field names, their
types or values, a 404's body, paging), written down with the recording it came from
(``loopback.azureml.recordings``: paths in Azure/azure-sdk-assets, folder
``python/sdk/ml/azure-ai-ml/tests/recordings/``). The same request is sent to the loopback over
HTTPS, as azure-ai-ml sends it, and its answer must keep every fact; ``differences`` says which
one it breaks, and ``test_a_changed_field_is_caught`` shows that one changed field fails.
Routes with no recording (VM sizes, usages, a missing compute's 404) are held to Azure's REST
API specification (``Microsoft.MachineLearningServices`` stable 2024-04-01) or to azure-ai-ml's
own handling, and docs/azure.md says so.
"""
from __future__ import annotations

import copy
import json
from typing import Any

import pytest
import requests
from loopback.azureml import recordings

API = "api-version=2023-08-01-preview"
ENV_TYPE = "Microsoft.MachineLearningServices/workspaces/environments/versions"
MODEL_TYPE = "Microsoft.MachineLearningServices/workspaces/models/versions"
SYSTEM_DATA = {"createdAt": str, "createdBy": str, "createdByType": str,
               "lastModifiedAt": str, "lastModifiedBy": str, "lastModifiedByType": str}
#: a conda file as the service keeps it: JSON text, whatever YAML it was given
JSON_TEXT = "json-text"
ABSENT = "absent"
CONDA_YAML = "channels:\n- conda-forge\ndependencies:\n- python=3.8\n- pip\n- pip:\n  - mlflow\n"

ENVIRONMENT_VERSION = {
    "id": str, "name": "1", "type": ENV_TYPE, "systemData": SYSTEM_DATA,
    "properties": {"description": str, "tags": dict, "properties": dict, "isArchived": False,
                   "isAnonymous": False, "environmentType": "UserCreated", "image": str,
                   "condaFile": JSON_TEXT, "osType": "Linux", "provisioningState": "Succeeded"}}
MODEL_VERSION = {
    "id": str, "name": "3", "type": MODEL_TYPE, "systemData": SYSTEM_DATA,
    "properties": {"description": "this is my test model", "tags": {"foo": "bar"},
                   "properties": dict, "isArchived": False, "isAnonymous": False,
                   "flavors": dict, "modelType": "mlflow_model", "modelUri": str,
                   "provisioningState": "Succeeded"}}
MODEL_BODY = {"properties": {
    "description": "this is my test model", "properties": {}, "tags": {"foo": "bar"},
    "isAnonymous": False, "isArchived": False,
    "flavors": {"python_function": {"data": {"loader_module": "mlflow.sklearn"}}},
    "modelType": "mlflow_model",
    "modelUri": "azureml://subscriptions/00000000-0000-0000-0000-000000000000/resourcegroups/"
                "rg-ml/workspaces/ws-defects/datastores/workspaceblobstore/paths/LocalUpload/"
                "0123/model"}}

#: name -> (recording or authority, method, path under the workspace (or the subscription, for
#: a path that starts with "/"), query, request body, status, the answer's facts)
FACTS: dict[str, tuple[str, str, str, str, Any, int, Any]] = {
    # azure-ai-ml resolves @latest through the versions list, newest first, one version
    "environment by label": (
        recordings.ENVIRONMENT_LATEST, "GET", "environments/conf-env/versions",
        "$orderBy=createdtime%20desc&$top=1", None, 200,
        {"value": [ENVIRONMENT_VERSION], "nextLink": ABSENT}),
    "component by label": (
        recordings.COMPONENT_LATEST, "GET", "components/score/versions",
        "$orderBy=createdtime%20desc&$top=1", None, 200,
        {"value": [{"id": str, "name": "3", "systemData": SYSTEM_DATA,
                    "type": "Microsoft.MachineLearningServices/workspaces/components/versions",
                    "properties": {"tags": dict, "properties": dict, "isArchived": False,
                                   "isAnonymous": False, "provisioningState": "Succeeded",
                                   "componentSpec": {"name": "score", "version": "3",
                                                     "type": "command", "command": str,
                                                     "environment": str}}}],
         "nextLink": ABSENT}),
    "environment version": (
        recordings.ENVIRONMENT_LATEST, "GET", "environments/conf-env/versions/1", "", None, 200,
        ENVIRONMENT_VERSION),
    "model with no versions": (
        recordings.MODEL_CRUD, "GET", "models/conf-model/versions",
        "$orderBy=createdtime%20desc&$top=1", None, 404,
        {"error": {"code": "UserError", "message": str, "details": [
            {"code": "ModelNotFound",
             "message": "Model container with name: conf-model not found."}]}}),
    "model registered": (
        recordings.MODEL_CRUD, "PUT", "models/conf-model/versions/3", "", MODEL_BODY, 201,
        MODEL_VERSION),
    "model fetched": (
        recordings.MODEL_CRUD, "GET", "models/conf-model/versions/3", "", None, 200,
        MODEL_VERSION),
    "model versions listed": (
        recordings.MODEL_CRUD, "GET", "models/conf-model/versions", "listViewType=ActiveOnly",
        None, 200, {"value": [MODEL_VERSION], "nextLink": ABSENT}),
    "workspace blob store": (
        recordings.MODEL_CRUD, "GET", "datastores/workspaceblobstore", "", None, 200,
        {"id": str, "name": "workspaceblobstore",
         "type": "Microsoft.MachineLearningServices/workspaces/datastores",
         "properties": {"isDefault": True, "credentials": {"credentialsType": "AccountKey"},
                        "datastoreType": "AzureBlob", "accountName": str,
                        "containerName": str, "endpoint": str, "protocol": "https"}}),
    "datastore secrets (expirable)": (
        recordings.MODEL_CRUD, "POST", "datastores/workspaceblobstore/listSecrets", "",
        {"expirableSecret": True, "expireAfterHours": 1}, 200,
        {"secretsType": "Sas", "sasToken": str}),
    "compute": (
        recordings.COMPUTE, "GET", "computes/cpu-cluster", "", None, 200,
        {"id": str, "name": "cpu-cluster",
         "type": "Microsoft.MachineLearningServices/workspaces/computes", "location": str,
         "properties": {"computeType": "AmlCompute", "provisioningState": "Succeeded",
                        "computeLocation": str, "disableLocalAuth": bool,
                        "properties": {"vmSize": str, "vmPriority": "Dedicated",
                                       "osType": "Linux",
                                       "scaleSettings": {"maxNodeCount": int,
                                                         "minNodeCount": int,
                                                         "nodeIdleTimeBeforeScaleDown": str}}}}),
    # no recording: azure-ai-ml's _resolve_compute_id rewords this 404 because its body says
    # nothing ("Operation returned an invalid status 'Not Found'")
    "missing compute": (
        "azure-ai-ml operations/_job_operations.py _resolve_compute_id", "GET",
        "computes/no-such-cluster", "", None, 404, b""),
    # no recording: the REST API specification's VirtualMachineSizeListResult / ListUsagesResult
    "VM sizes": (
        "REST spec: VirtualMachineSizes_List", "GET",
        "/providers/Microsoft.MachineLearningServices/locations/westeurope/vmSizes", "", None,
        200, {"value": [{"name": str, "family": str, "vCPUs": int, "gpus": int,
                         "memoryGB": float, "lowPriorityCapable": bool, "premiumIO": bool}],
              "nextLink": ABSENT}),
    "usages": (
        "REST spec: Usages_List", "GET",
        "/providers/Microsoft.MachineLearningServices/locations/westeurope/usages", "", None,
        200, {"value": [{"id": str, "amlWorkspaceLocation": str, "type": str, "unit": "Count",
                         "currentValue": int, "limit": int,
                         "name": {"value": str, "localizedValue": str}}]}),
}


def differences(fact: Any, answer: Any, where: str = "") -> list[str]:
    """Where ``answer`` breaks ``fact``: a missing or extra-but-absent field, another type or
    value; each item of a list against the fact's one item."""
    at = where or "the answer"
    if fact is ABSENT:
        return [] if answer is ABSENT else [f"{at}: present, the service sends none"]
    if answer is ABSENT:
        return [f"{at}: missing"]
    if fact == JSON_TEXT:
        try:
            return [] if isinstance(json.loads(answer), dict) else [f"{at}: not a JSON object"]
        except (TypeError, ValueError):
            return [f"{at}: {answer!r:.40} is not JSON text"]
    if isinstance(fact, type):
        ok = isinstance(answer, fact) and not (fact is int and isinstance(answer, bool))
        return [] if ok else [f"{at}: {type(answer).__name__}, not {fact.__name__}"]
    if isinstance(fact, dict):
        if not isinstance(answer, dict):
            return [f"{at}: {type(answer).__name__}, not an object"]
        found = []
        for key, inner in fact.items():
            found += differences(inner, answer.get(key, ABSENT), f"{where}.{key}".lstrip("."))
        return found
    if isinstance(fact, list):
        if not isinstance(answer, list) or not answer:
            return [f"{at}: {answer!r:.40}, not a list of {len(fact)} or more"]
        return [d for i, item in enumerate(answer) for d in
                differences(fact[0], item, f"{where}[{i}]")]
    return [] if answer == fact else [f"{at}: {answer!r}, the service answers {fact!r}"]


def _send(azureml, method: str, path: str, query: str, body: Any) -> requests.Response:
    token = azureml.credential().get_token(f"{azureml.url}/.default").token
    base = f"{azureml.url}/subscriptions/{azureml.subscription_id}"
    url = (base + path) if path.startswith("/") else f"{base}/resourceGroups/" \
        f"{azureml.resource_group}/providers/Microsoft.MachineLearningServices/workspaces/" \
        f"{azureml.workspace_name}/{path}"
    return requests.request(method, f"{url}?{API}" + (f"&{query}" if query else ""),
                            json=body, headers={"Authorization": f"Bearer {token}"},
                            verify=str(azureml.cert_path), timeout=30)


def _answer(azureml, name: str) -> tuple[int, Any]:
    _, method, path, query, body, _, fact = FACTS[name]
    got = _send(azureml, method, path, query, body)
    if isinstance(fact, bytes):
        return got.status_code, got.content
    return got.status_code, got.json()


@pytest.fixture
def workspace(azureml):
    azureml.add_environment("conf-env", "1", conda_file=CONDA_YAML)
    azureml.add_component("score", "2")
    azureml.add_component("score", "3")
    return azureml


# in the order a user meets them: the model's 404 before it is registered
@pytest.mark.parametrize("name", list(FACTS))
def test_each_asset_route_answers_as_the_service_recorded(workspace, name):
    source, *_, status, fact = FACTS[name]
    if name in ("model fetched", "model versions listed"):
        assert _answer(workspace, "model registered")[0] == 201
    got_status, answer = _answer(workspace, name)
    assert got_status == status, f"{name} ({source})"
    if isinstance(fact, bytes):
        assert answer == fact, f"{name}: a body the service does not send ({source})"
    else:
        assert differences(fact, answer) == [], f"{name} ({source})"


@pytest.mark.parametrize("name, change, expected", [
    ("environment by label", lambda a: a["value"][0]["properties"].update(
        condaFile="channels:\n- conda-forge\n"), "value[0].properties.condaFile: "),
    ("environment by label", lambda a: a.update(nextLink="https://next"),
     "nextLink: present, the service sends none"),
    ("datastore secrets (expirable)", lambda a: a.update(secretsType="AccountKey"),
     "secretsType: 'AccountKey', the service answers 'Sas'"),
    ("model with no versions", lambda a: a["error"].pop("details"),
     "error.details: missing"),
    ("compute", lambda a: a["properties"]["properties"]["scaleSettings"].update(
        maxNodeCount="4"), "properties.properties.scaleSettings.maxNodeCount: str, not int"),
    ("VM sizes", lambda a: a["value"][0].pop("vCPUs"), "value[0].vCPUs: missing"),
])
def test_a_changed_field_is_caught(workspace, name, change, expected):
    """The check fails on one field changed in a real loopback answer (so it would fail on a
    loopback that drifted from the recording)."""
    _, answer = _answer(workspace, name)
    fact = FACTS[name][-1]
    assert differences(fact, answer) == []
    changed = copy.deepcopy(answer)
    change(changed)
    found = differences(fact, changed)
    assert len(found) == 1 and found[0].startswith(expected), found


def test_every_recording_named_is_one_the_loopback_cites():
    """Each fact names a recording the loopback's answers name too (or an authority where no
    recording exists), so a reader can go from an answer to the traffic it reproduces."""
    from pathlib import Path

    cited = (Path(recordings.__file__).parent / "server.py").read_text() + \
        (Path(recordings.__file__).parent / "payloads.py").read_text()
    for name, (source, *_) in FACTS.items():
        if source.endswith(".json"):
            constant = next(k for k, v in vars(recordings).items() if v == source)
            assert f"recordings.{constant}" in cited, name
            assert recordings.url(source).startswith("https://github.com/Azure/azure-sdk-assets/")
