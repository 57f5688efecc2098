"""What the real Azure ML service answered for the job and run calls mlpipe and azure-ai-ml
make, written down as facts (status codes, headers, field names and types, where outputs
live), each naming the recording it was read from. Not the recordings themselves: those are
Microsoft's (Azure/azure-sdk-assets, ``python/sdk/ml/azure-ai-ml/tests/recordings/``, test-proxy
JSON); a fact here is what one entry of one file shows, in our words.

A shape maps a path (a tuple of keys) to what the value there must be: a type, ``None`` (the
service wrote ``null``), ``ABSENT`` (no such key), a compiled pattern (a string matching it),
or a literal. ``differences`` lists where an answer departs from a shape; the conformance test
(``test_conformance_runs.py``) holds the loopback to these.
"""
from __future__ import annotations

import re
from typing import Any

RECORDINGS = "Azure/azure-sdk-assets:python/sdk/ml/azure-ai-ml/tests/recordings/pipeline_job/e2etests/"
#: test_pipeline_job.py::TestPipelineJobLongRunning::test_pipeline_job_child_run_download
#: (azure-ai-ml 1.32.0, recorded 2026-02-27): PUT jobs/NAME, GET jobs/NAME polled through
#: Running to Failed, GET history runs/NAME/children (two failed child runs).
CHILD_RUN_DOWNLOAD = (RECORDINGS + "test_pipeline_job.pyTestPipelineJobLongRunning"
                                   "test_pipeline_job_child_run_download.json")
#: test_pipeline_job.py::TestPipelineJobLongRunning::test_pipeline_job_download: the same
#: pipeline, then POST history .../rundata for the (failed) pipeline run.
DOWNLOAD = (RECORDINGS + "test_pipeline_job.pyTestPipelineJobLongRunning"
                         "test_pipeline_job_download.json")
#: test_pipeline_job.py::TestPipelineJobLongRunning::test_reused_pipeline_child_job_download:
#: a pipeline job with ``outputs: {}``, polled, and its children.
REUSED_DOWNLOAD = (RECORDINGS + "test_pipeline_job.pyTestPipelineJobLongRunning"
                                "test_reused_pipeline_child_job_download.json")

ABSENT = object()
GUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
ISO_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")
#: Azure ML's job statuses a recording shows a pipeline job in, in the order it moved
#: (CHILD_RUN_DOWNLOAD: the PUT answered NotStarted, the GETs Running, then Failed).
RECORDED_STATUSES = ("NotStarted", "Running", "Failed")

#: The JobBase of a pipeline job (CHILD_RUN_DOWNLOAD, the PUT entry, 201, and every GET,
#: 200): its outputs have ``uri: null`` whatever the status; services Tracking and Studio.
PIPELINE_JOB = {
    ("id",): str, ("name",): str, ("type",): "Microsoft.MachineLearningServices/workspaces/jobs",
    ("properties", "jobType"): "Pipeline", ("properties", "status"): str,
    ("properties", "displayName"): str, ("properties", "experimentName"): str,
    ("properties", "properties"): dict, ("properties", "tags"): dict,
    ("properties", "jobs"): dict,
    ("properties", "services", "Tracking", "jobServiceType"): "Tracking",
    ("properties", "services", "Tracking", "endpoint"): re.compile(r"^azureml://.*/mlflow/v1\.0/"),
    ("properties", "services", "Studio", "jobServiceType"): "Studio",
    ("properties", "services", "Studio", "endpoint"): re.compile(r"/runs/[^/?]+\?wsid="),
    ("systemData", "createdAt"): ISO_TIME,
}
#: One declared output of a pipeline job, in any state (CHILD_RUN_DOWNLOAD: ``job_out_path_1``
#: in the PUT answer and every GET; the Failed one too).
PIPELINE_OUTPUT = {("uri",): None, ("jobOutputType",): str, ("mode",): str}
#: The PUT that creates a job answers 201 with the resource's ARM URL in Location.
CREATED = {"status": 201, "headers": ("Location",)}

#: A child run as ``GET history/v1.0/.../runs/NAME/children`` lists it (CHILD_RUN_DOWNLOAD and
#: REUSED_DOWNLOAD, the children entries): a GUID run id under the pipeline's, the node's name
#: as display name, ``services: {}``, and ``outputs: null`` and ``inputs: null`` (a step's
#: outputs are not here: see RUN_DATA).
CHILD_RUN = {
    ("runId",): GUID, ("parentRunId",): str, ("rootRunId",): str, ("runUuid",): GUID,
    ("experimentId",): GUID, ("displayName",): str, ("status",): str,
    ("createdUtc",): ISO_TIME, ("runType",): "azureml.StepRun",
    ("properties",): dict, ("properties", "azureml.nodeid"): str,
    ("properties", "azureml.pipelinerunid"): str, ("properties", "azureml.runsource"):
        "azureml.StepRun",
    ("tags", "azureml.nodeid"): str, ("tags", "azureml.pipeline"): str,
    ("target",): str, ("compute", "target"): str,
    ("services",): {}, ("outputs",): None, ("inputs",): None, ("hidden",): False,
}
#: A failed child run adds its error (CHILD_RUN_DOWNLOAD: ``error.error.code`` "UserError",
#: the message) and its start and end times.
FAILED_CHILD_RUN = {**CHILD_RUN, ("status",): "Failed", ("error", "error", "code"): str,
                    ("error", "error", "message"): str, ("startTimeUtc",): ISO_TIME,
                    ("endTimeUtc",): ISO_TIME}
#: The children page: ``{"value": [...]}``; one page has no continuation token and no next link
#: (both recordings' children entries).
CHILDREN_PAGE = {("value",): list, ("continuationToken",): ABSENT, ("nextLink",): ABSENT}

#: ``POST history/v1.0/.../rundata`` (DOWNLOAD, the rundata entry): azure-ai-ml's
#: ``jobs.download`` asks with this body, and reads ``runMetadata.outputs`` (a map of output
#: name -> ``{"assetId", "type"}``: azure-ai-ml's TypedAssetReference, read by
#: ``get_job_output_uris_from_dataplane``). The recorded run had failed, so its outputs are
#: ``null``; no recording read here shows a completed run's (``docs/azure.md``).
RUN_DATA_REQUEST = {"runId": str, "selectRunMetadata": True, "selectRunDefinition": True,
                    "selectJobSpecification": True}
RUN_DATA = {
    ("runMetadata", "runId"): str, ("runMetadata", "status"): str,
    ("runMetadata", "services"): {}, ("runDefinition", "JobType"): str,
    ("runDefinition", "DisplayName"): str, ("jobSpecification",): None,
}
#: The pipeline run's own run data (DOWNLOAD): its outputs as the recorded failed run had them.
FAILED_RUN_DATA = {**RUN_DATA, ("runMetadata", "outputs"): None,
                   ("runMetadata", "inputs"): {}, ("runDefinition", "JobType"): "Pipeline"}
#: One output in a completed run's run data (the TypedAssetReference azure-ai-ml reads).
RUN_DATA_OUTPUT = {("assetId",): re.compile(r"^azureml://locations/[^/]+/workspaces/[^/]+/"
                                            r"(data|models)/azureml_[^/]+_output_\w+/versions/1$"),
                   ("type",): str}

#: No recording: MLflow's own REST API (mlflow.org, "REST API": GetRun, RESOURCE_DOES_NOT_EXIST)
#: is the authority for the workspace's MLflow routes.
MLFLOW_RUN = {("run", "info", "run_id"): str, ("run", "info", "status"): re.compile(
    r"^(RUNNING|SCHEDULED|FINISHED|FAILED|KILLED)$"), ("run", "info", "start_time"): int,
    ("run", "data", "metrics"): list, ("run", "data", "params"): list,
    ("run", "data", "tags"): list}
MLFLOW_NOT_FOUND = {"status": 404, ("error_code",): "RESOURCE_DOES_NOT_EXIST",
                    ("message",): str}
#: MLflow's GetMetricHistory (``metrics``: key, value, timestamp, step) and ListArtifacts
#: (``root_uri``, ``files``: path, is_dir, file_size).
MLFLOW_METRIC = {("key",): str, ("value",): float, ("timestamp",): int, ("step",): int}
MLFLOW_ARTIFACTS = {("root_uri",): str, ("files",): list}
MLFLOW_FILE = {("path",): str, ("is_dir",): bool}
#: No recording: ARM's error envelope (Azure REST API guidelines, ErrorResponse) for a job the
#: workspace does not have, and Job_Cancel's answer (the REST specification's
#: examples/Job/cancel.json: 202, polled through Location).
ARM_NOT_FOUND = {"status": 404, ("error", "code"): str, ("error", "message"): str}
CANCELED = {"status": 202, "headers": ("Location",)}


def _at(payload: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(payload, dict) or key not in payload:
            return ABSENT
        payload = payload[key]
    return payload


def differences(payload: Any, shape: dict[Any, Any], what: str = "answer") -> list[str]:
    """Where ``payload`` departs from ``shape`` (its non-path keys, ``status`` and
    ``headers``, are the caller's to check), one line each; empty when it conforms.

    Example:
        >>> differences({"services": {"Studio": {}}}, {("services",): {}})
        ["answer.services is {'Studio': {}}, the service answers {}"]
    """
    found = []
    for path, want in shape.items():
        if not isinstance(path, tuple):
            continue
        got = _at(payload, path)
        where = f"{what}.{'.'.join(path)}"
        if want is ABSENT:
            if got is not ABSENT:
                found.append(f"{where} is present ({got!r}); the service does not send it")
        elif got is ABSENT:
            found.append(f"{where} is missing")
        elif want is None:
            if got is not None:
                found.append(f"{where} is {got!r}, the service answers null")
        elif isinstance(want, type):
            if not isinstance(got, want) or (want is int and isinstance(got, bool)):
                found.append(f"{where} is {type(got).__name__} {got!r}, the service answers "
                             f"a {want.__name__}")
        elif isinstance(want, re.Pattern):
            if not isinstance(got, str) or not want.search(got):
                found.append(f"{where} is {got!r}, not of the service's form {want.pattern}")
        elif got != want:
            found.append(f"{where} is {got!r}, the service answers {want!r}")
    return found
