"""What the loopback service sends: REST payloads built from azure-ai-ml's own REST models.

Every ARM / Azure ML payload is an instance of a model from
``azure.ai.ml._restclient.arm_ml_service.models`` (the management API) or
``azure.ai.ml._restclient.runhistory.models`` (run history), turned into JSON by the models'
own serialization (``Model.as_dict``), so the field names and nesting are the SDK's, not ours.
The two payloads with no model in azure-ai-ml are the workspace discovery document (its keys
are the SDK's ``WorkspaceDiscoveryUrlKey``) and MLflow's ``runs/get`` answer (MLflow's REST API
``GetRun`` response: ``run.info`` / ``run.data``).
"""
from __future__ import annotations

import json
import uuid
from datetime import datetime
from typing import Any

import yaml
from azure.ai.ml._restclient.arm_ml_service import models as arm
from azure.ai.ml._restclient.runhistory import models as rh
from azure.ai.ml.constants._common import WorkspaceDiscoveryUrlKey

from loopback.azureml.credential import OBJECT_ID, TENANT_ID
from loopback.azureml.jobs import MLFLOW_STATUS, Job

USER = "ml-engineer@contoso.com"
#: Run history's asset type of a model output (data outputs keep their DataType value).
RUN_OUTPUT_TYPES = {"mlflow_model": "MLFlowModel", "custom_model": "CustomModel",
                    "triton_model": "TritonModel"}
PROVIDER = "Microsoft.MachineLearningServices"


def _dict(model: Any) -> dict[str, Any]:
    return model.as_dict()


def _iso(when: datetime | None) -> str | None:
    return None if when is None else when.isoformat().replace("+00:00", "Z")


def _ms(when: datetime | None) -> int | None:
    return None if when is None else int(when.timestamp() * 1000)


def system_data(created: datetime) -> Any:
    return arm.SystemData(created_by=USER, created_by_type="User", created_at=created,
                          last_modified_by=USER, last_modified_by_type="User",
                          last_modified_at=created)


def _resource(model: Any, rid: str, name: str, rtype: str, created: datetime) -> dict[str, Any]:
    model.id, model.name, model.type = rid, name, rtype
    model.system_data = system_data(created)
    return _dict(model)


# --- errors -----------------------------------------------------------------------------------

def arm_error(code: str, message: str, target: str | None = None) -> dict[str, Any]:
    """ARM's error envelope (``ErrorResponse``): ``{"error": {"code", "message", ...}}``."""
    detail = arm.ErrorDetail()
    detail.code, detail.message = code, message
    if target is not None:
        detail.target = target
    return _dict(arm.ErrorResponse(error=detail))


def mlflow_error(code: str, message: str) -> dict[str, Any]:
    """MLflow's REST error body (``error_code`` / ``message``)."""
    return {"error_code": code, "message": message}


# --- the workspace and its assets -------------------------------------------------------------

def workspace(svc: Any) -> dict[str, Any]:
    props = arm.WorkspaceProperties(
        friendly_name=svc.workspace_name, discovery_url=f"{svc.url}/discovery",
        storage_account=svc.storage_account_id, key_vault=f"{svc.resource_group_id}/providers/"
        f"Microsoft.KeyVault/vaults/kv-{svc.workspace_name}",
        application_insights=None, container_registry=None, hbi_workspace=False)
    props.workspace_id = svc.workspace_id
    props.ml_flow_tracking_uri = svc.mlflow_tracking_uri
    props.provisioning_state = "Succeeded"
    model = arm.Workspace(properties=props, location=svc.location, kind="Default",
                          identity=arm.ManagedServiceIdentity(type="SystemAssigned"),
                          sku=arm.Sku(name="Basic", tier="Basic"), tags={})
    return _resource(model, svc.workspace_id_arm, svc.workspace_name,
                     f"{PROVIDER}/workspaces", svc.created_at)


def discovery(svc: Any) -> dict[str, str]:
    """The workspace discovery document: every service of the workspace on this host."""
    return {key.value: svc.url for key in WorkspaceDiscoveryUrlKey}


def datastore(svc: Any, name: str) -> dict[str, Any]:
    props = arm.AzureBlobDatastore(
        account_name=svc.storage_account, container_name=svc.container,
        endpoint=svc.storage_suffix, protocol="https",
        credentials=arm.AccountKeyDatastoreCredentials(secrets=None),
        description="the workspace's default blob store", tags={}, properties={})
    props.is_default = True
    return _resource(arm.Datastore(properties=props), f"{svc.workspace_id_arm}/datastores/{name}",
                     name, f"{PROVIDER}/workspaces/datastores", svc.created_at)


def datastore_secrets(svc: Any, expirable: bool = False) -> dict[str, Any]:
    """``listSecrets``: the account key, or for ``{"expirableSecret": true, ...}`` (what
    azure-ai-ml sends before an upload) a SAS token, as the service answers it
    (``recordings.MODEL_CRUD``: ``secretsType: Sas``, a ``?``-led ``sasToken``)."""
    if expirable:
        return _dict(arm.SasDatastoreSecrets(
            sas_token="?sv=2021-08-06&sig=loopback&se=2099-01-01T00%3A00%3A00Z&srt=co&ss=bf"
                      "&sp=rcuwdl"))
    return _dict(arm.AccountKeyDatastoreSecrets(key=svc.storage_key))


def model_not_found(name: str) -> dict[str, Any]:
    """The 404 of a model with no container (``recordings.MODEL_CRUD``): ``UserError``
    with the ``ModelNotFound`` detail."""
    body = arm_error("UserError", "The specified resource was not found.")
    inner = arm.ErrorDetail()
    inner.code, inner.message = "ModelNotFound", f"Model container with name: {name} not found."
    body["error"]["details"] = [{**_dict(inner), "details": [], "additionalInfo": []}]
    return body


def code_version(svc: Any, name: str, version: str, body: dict[str, Any]) -> dict[str, Any]:
    props = arm.CodeVersionProperties(**_writable(arm.CodeVersionProperties,
                                                  body.get("properties") or {}))
    props.provisioning_state = "Succeeded"
    return _resource(arm.CodeVersion(properties=props),
                     f"{svc.workspace_id_arm}/codes/{name}/versions/{version}", version,
                     f"{PROVIDER}/workspaces/codes/versions", svc.created_at)


def model_version(svc: Any, name: str, version: str, body: dict[str, Any]) -> dict[str, Any]:
    """A registered model version (``models/{name}/versions/{version}``) as sent by
    ``models.create_or_update``, with what the service fills in."""
    props = arm.ModelVersionProperties(**_writable(arm.ModelVersionProperties,
                                                   body.get("properties") or {}))
    props.provisioning_state = "Succeeded"
    for field, empty in (("flavors", {}), ("tags", {}), ("properties", {}),
                         ("is_anonymous", False), ("is_archived", False)):
        if getattr(props, field, None) is None:   # the service's defaults
            setattr(props, field, empty)
    return _resource(arm.ModelVersion(properties=props),
                     f"{svc.workspace_id_arm}/models/{name}/versions/{version}", version,
                     f"{PROVIDER}/workspaces/models/versions", svc.created_at)


def page(values: list[dict[str, Any]], next_link: str | None = None) -> dict[str, Any]:
    """An ARM paged list (``value`` + ``nextLink``)."""
    out: dict[str, Any] = {"value": values}
    if next_link:
        out["nextLink"] = next_link
    return out


def pending_upload(svc: Any, upload_id: str, sas_uri: str, blob_uri: str) -> dict[str, Any]:
    return _dict(arm.PendingUploadResponseDto(
        pending_upload_id=upload_id, pending_upload_type="TemporaryBlobReference",
        blob_reference_for_consumption=arm.BlobReferenceForConsumptionDto(
            blob_uri=blob_uri, storage_account_arm_id=svc.storage_account_id,
            credential=arm.SASCredentialDto(credential_type="SAS", sas_uri=sas_uri))))


def component_version(svc: Any, name: str, version: str, body: dict[str, Any]) -> dict[str, Any]:
    props = arm.ComponentVersionProperties(**_writable(arm.ComponentVersionProperties,
                                                       body.get("properties") or {}))
    props.provisioning_state = "Succeeded"
    for field, empty in (("tags", {}), ("properties", {}), ("is_anonymous", False),
                         ("is_archived", False)):
        if getattr(props, field, None) is None:   # the service's defaults (COMPONENT_LATEST)
            setattr(props, field, empty)
    return _resource(arm.ComponentVersion(properties=props),
                     f"{svc.workspace_id_arm}/components/{name}/versions/{version}", version,
                     f"{PROVIDER}/workspaces/components/versions", svc.created_at)


def environment_version(svc: Any, name: str, version: str, image: str,
                        conda_file: str | None = None) -> dict[str, Any]:
    extras = getattr(svc, "environment_extras", {}).get((name, version)) or {}
    # the service keeps a conda file as JSON text, whatever YAML it was given
    # (recordings.ENVIRONMENT_LATEST: "condaFile": "{\n  \"channels\": ...")
    more: dict[str, Any] = {"conda_file": _json_text(conda_file)} if conda_file else {}
    if extras.get("build"):
        more["build"] = arm.BuildContext(context_uri=extras["build"],
                                         dockerfile_path="Dockerfile")
    else:
        more["image"] = image
    props = arm.EnvironmentVersionProperties(os_type="Linux", is_anonymous=False,
                                             is_archived=False, properties={},
                                             description=f"environment {name}:{version}",
                                             tags=dict(extras.get("tags") or {}), **more)
    props.environment_type = "UserCreated"
    props.provisioning_state = "Succeeded"
    return _resource(arm.EnvironmentVersion(properties=props),
                     f"{svc.workspace_id_arm}/environments/{name}/versions/{version}", version,
                     f"{PROVIDER}/workspaces/environments/versions", svc.created_at)


def _json_text(conda_file: str) -> str:
    try:
        loaded = yaml.safe_load(conda_file)
    except yaml.YAMLError:
        return conda_file
    return json.dumps(loaded, indent=2) if isinstance(loaded, dict) else conda_file


def compute(svc: Any, name: str, vm_size: str, max_nodes: int) -> dict[str, Any]:
    """A compute cluster as ``GET computes/NAME`` answers it (``recordings.COMPUTE``)."""
    props = arm.AmlCompute(
        compute_location=svc.location, description=f"compute cluster {name}",
        disable_local_auth=True,
        properties=arm.AmlComputeProperties(
            os_type="Linux", vm_size=vm_size, vm_priority="Dedicated",
            scale_settings=arm.ScaleSettings(max_node_count=max_nodes, min_node_count=0,
                                             node_idle_time_before_scale_down="PT120S")))
    props.provisioning_state = "Succeeded"
    model = arm.ComputeResource(properties=props, location=svc.location, tags={})
    return _resource(model, f"{svc.workspace_id_arm}/computes/{name}", name,
                     f"{PROVIDER}/workspaces/computes", svc.created_at)


def vm_sizes(sizes: dict[str, tuple[str, int, int]]) -> dict[str, Any]:
    """The region's VM sizes (``VirtualMachineSizeListResult``; one page, as the service's)."""
    return _dict(arm.VirtualMachineSizeListResult(value=[
        arm.VirtualMachineSize(name=name, family=family, v_cp_us=vcpus, gpus=gpus,
                               memory_gb=float(vcpus * 4), low_priority_capable=True,
                               premium_io=True, supported_compute_types=[
                                   "AmlCompute", "ComputeInstance"])
        for name, (family, vcpus, gpus) in sorted(sizes.items())]))


def usages(svc: Any, quota: dict[str, tuple[int, int]]) -> list[dict[str, Any]]:
    """The subscription's vCPU usage per VM family in the region (``Usage`` items)."""
    out = []
    for family, (current, limit) in sorted(quota.items()):
        out.append(_dict(arm.Usage(
            id=(f"/subscriptions/{svc.subscription_id}/providers/Microsoft.MachineLearningServices"
                f"/locations/{svc.location}/usages/{family}"),
            aml_workspace_location=svc.location,
            type="Microsoft.MachineLearningServices/vmFamily/usages", unit="Count",
            current_value=current, limit=limit,
            name=arm.UsageName(value=family, localized_value=f"{family} vCPUs"))))
    return out


def data_version(svc: Any, name: str, version: str, kind: str, uri: str) -> dict[str, Any]:
    cls = {"uri_file": arm.UriFileDataVersion, "mltable": arm.MLTableData}.get(
        kind, arm.UriFolderDataVersion)
    props = cls(data_uri=uri, is_anonymous=False, description=f"data asset {name}:{version}",
                tags={}, properties={})
    return _resource(arm.DataVersionBase(properties=props),
                     f"{svc.workspace_id_arm}/data/{name}/versions/{version}", version,
                     f"{PROVIDER}/workspaces/data/versions", svc.created_at)


def container(svc: Any, kind: str, name: str, versions: list[str], data_type: str | None = None
              ) -> dict[str, Any]:
    """A data or environment container (``GET .../data/NAME``): its latest version."""
    cls, props_cls = {"data": (arm.DataContainer, arm.DataContainerProperties),
                      "components": (arm.ComponentContainer, arm.ComponentContainerProperties)
                      }.get(kind, (arm.EnvironmentContainer, arm.EnvironmentContainerProperties))
    props = props_cls(description=f"{kind} {name}", tags={}, properties={}, is_archived=False,
                      **({"data_type": data_type} if kind == "data" else {}))
    latest = max(versions, key=lambda v: (len(v), v))
    props.latest_version = latest
    props.next_version = str(int(latest) + 1) if latest.isdigit() else None
    return _resource(cls(properties=props), f"{svc.workspace_id_arm}/{kind}/{name}", name,
                     f"{PROVIDER}/workspaces/{kind}", svc.created_at)


def _writable(cls: Any, given: dict[str, Any]) -> dict[str, Any]:
    """The fields of a REST body that ``cls`` accepts as keyword arguments, by their
    Python names (read-only fields dropped, as the service ignores them)."""
    try:
        cls()
    except TypeError:
        pass
    by_rest = {f._rest_name: attr for attr, f in cls._attr_to_rest_field.items()
               if f._visibility != ["read"]}
    return {by_rest[k]: v for k, v in given.items() if k in by_rest}


# --- jobs -------------------------------------------------------------------------------------

def _services(svc: Any, job: Job) -> dict[str, Any]:
    return {"Tracking": arm.JobService(job_service_type="Tracking",
                                       endpoint=svc.mlflow_tracking_uri + "?"),
            "Studio": arm.JobService(job_service_type="Studio", endpoint=svc.studio_url(job))}


def job_base(svc: Any, job: Job) -> dict[str, Any]:
    """The ``JobBase`` resource of a top-level job (``GET .../jobs/NAME`` on the management
    API): the definition the client sent, with the status, services, outputs and run
    properties the service adds."""
    spec = dict(job.definition)
    spec.pop("status", None)
    spec["properties"] = {**(spec.get("properties") or {}), **job.properties}
    spec["tags"] = dict(job.tags)
    spec["services"] = {}
    outputs = dict(spec.get("outputs") or {})
    for port, out in job.outputs.items():
        # a pipeline job's outputs read "uri": null in every state (recorded:
        # test_pipeline_job_child_run_download, its PUT and GET entries); its run data names them
        uri = None if job.kind == "Pipeline" else out.uri
        outputs[port] = {"mode": out.mode, **(outputs.get(port) or {}),
                         "jobOutputType": out.type, "uri": uri}
    spec["outputs"] = outputs
    model = arm.JobBase({"properties": spec})
    props = model.properties
    props.services = _services(svc, job)
    props.status = job.status
    props.experiment_name = job.experiment
    props.display_name = job.display_name
    return _resource(model, svc.job_arm_id(job.name), job.name,
                     f"{PROVIDER}/workspaces/jobs", job.created_at)


def child_envelope(svc: Any, job: Job) -> dict[str, Any]:
    """What the management API answers for a pipeline's child job: the resource without
    properties (child jobs are served by run history; azure-ai-ml then asks there)."""
    model = arm.JobBase({})
    return _resource(model, svc.job_arm_id(job.name), job.name,
                     f"{PROVIDER}/workspaces/jobs", job.created_at)


def _user() -> Any:
    return rh.User(user_object_id=OBJECT_ID, user_tenant_id=TENANT_ID, user_name=USER, upn=USER,
                   user_iss=f"https://sts.loopback.test/{TENANT_ID}/", user_idp=None)


def run(svc: Any, job: Job, *, outputs: bool = False) -> dict[str, Any]:
    """The run-history ``Run`` of a job as ``runs/{id}`` and ``runs/{id}/children`` give it:
    ``"outputs": null``, ``"inputs": null`` and ``"services": {}`` even for a completed job
    that wrote outputs (recorded: test_pipeline_job_child_run_download, the children entry;
    test_pipeline_job_download, the rundata entry's runMetadata). ``outputs``: with the
    outputs' asset ids, as ``rundata``'s ``runMetadata`` carries them."""
    root = job.root
    error = None
    if job.status in ("Failed", "NotResponding") and job.error:
        error = rh.RunHistoryErrorResponse(error=rh.RootError(
            code="UserError", severity=None, message=job.error))
    found = {port: rh.TypedAssetReference(asset_id=svc.output_asset_id(job, port),
                                          type=RUN_OUTPUT_TYPES.get(out.type, out.type))
             for port, out in job.outputs.items() if out.uri} if outputs else {}
    if job.kind == "Pipeline" and job.status != "Completed":
        found = {}  # a failed pipeline run's run data: "outputs": null (test_pipeline_job_download)
    model = rh.Run(
        run_id=job.name, run_uuid=str(uuid.uuid5(uuid.NAMESPACE_URL, job.name)),
        root_run_id=root.name, parent_run_id=job.parent.name if job.parent else None,
        experiment_id=job.experiment_id, status=job.status, display_name=job.display_name,
        name=job.display_name, created_utc=job.created_at, created_by=_user(),
        user_id=OBJECT_ID, start_time_utc=job.started_at, end_time_utc=job.ended_at,
        last_modified_utc=job.ended_at or job.started_at or job.created_at,
        run_type=("azureml.PipelineRun" if job.kind == "Pipeline" else
                  "azureml.SubGraphCloud" if job.kind == "SubGraph" else "azureml.StepRun"),
        properties=dict(job.properties), tags=dict(job.tags),
        target=job.compute, compute=(rh.Compute(target=job.compute, target_type="AmlCompute")
                                     if job.compute else None),
        services={}, error=error, outputs=found or None, hidden=False, is_virtual=False,
        cancelation_reason=job.error if job.status == "Canceled" else None)
    out = _dict(model)
    out.update(inputs=None, outputs=out.get("outputs"))  # null, as the service writes them
    return out


def run_list(svc: Any, jobs: list[Job], continuation: str | None = None,
             next_link: str | None = None) -> dict[str, Any]:
    return _dict(rh.PaginatedRunList(value=[rh.Run(run(svc, j)) for j in jobs],
                                     continuation_token=continuation, next_link=next_link))


def mlflow_run(svc: Any, job: Job) -> dict[str, Any]:
    """MLflow's ``GetRun`` response for the job's run (Azure ML's MLflow run id is the job
    name); times in epoch milliseconds."""
    info = {"run_id": job.name, "run_uuid": job.name, "run_name": job.display_name,
            "experiment_id": job.experiment_id, "user_id": USER,
            "status": MLFLOW_STATUS.get(job.status, "SCHEDULED"),
            "start_time": _ms(job.started_at), "end_time": _ms(job.ended_at),
            "artifact_uri": f"azureml://experiments/{job.experiment}/runs/{job.name}/artifacts",
            "lifecycle_stage": "active"}
    tags = {"mlflow.runName": job.display_name, "mlflow.user": USER, **job.mlflow.tags}
    if job.parent is not None:
        tags["mlflow.parentRunId"] = job.parent.name
    data = {"metrics": [{"key": m.key, "value": m.value, "timestamp": m.timestamp,
                         "step": m.step} for m in job.mlflow.metrics],
            "params": [{"key": k, "value": v} for k, v in sorted(job.mlflow.params.items())],
            "tags": [{"key": k, "value": v} for k, v in sorted(tags.items())]}
    return {"run": {"info": {k: v for k, v in info.items() if v is not None}, "data": data,
                    "inputs": {}}}


def run_data(svc: Any, job: Job) -> dict[str, Any]:
    """Run history's ``rundata`` answer (``GetRunDataResult``): the run's metadata, which is
    where azure-ai-ml's ``jobs.download`` reads a job's outputs (their asset ids) from."""
    out = _dict(rh.GetRunDataResult(run_metadata=rh.Run(run(svc, job, outputs=True)),
                                    run_definition=None, job_specification=None))
    # the run's definition, in the PascalCase the recorded answer has (test_pipeline_job_download,
    # the rundata entry: JobType, DisplayName, ExperimentName, Status, Tags, Properties, ...)
    out["runDefinition"] = {"JobType": job.kind, "DisplayName": job.display_name,
                            "ExperimentName": job.experiment, "Status": "NotStarted",
                            "Tags": dict(job.tags), "Properties": {}}
    out["runMetadata"]["inputs"] = {} if job.kind == "Pipeline" else None
    out["jobSpecification"] = None
    return out


def resolved_data_uris(svc: Any, found: dict[str, Any]) -> dict[str, Any]:
    """The data plane's ``batchGetResolvedUris`` answer: each data output's asset id -> the
    long-form datastore URI of its files."""
    from azure.ai.ml._restclient.dataset_dataplane import models as dd

    return _dict(dd.BatchDataUriResponse(values_property={
        asset_id: dd.DataUriV2Response(uri=svc.long_datastore_uri(out.uri), type=out.type)
        for asset_id, out in found.items()}))


def resolved_model_paths(svc: Any, found: dict[str, Any]) -> dict[str, Any]:
    """The model registry's ``batchGetResolvedUris`` answer: each model output's asset id ->
    the long-form datastore URI of its files."""
    from azure.ai.ml._restclient.model_dataplane import models as md

    return _dict(md.BatchModelPathResponseDto(values_property={
        asset_id: md.ModelPathResponseDto(path=svc.long_datastore_uri(out.uri),
                                          type=RUN_OUTPUT_TYPES.get(out.type, out.type))
        for asset_id, out in found.items()}))
