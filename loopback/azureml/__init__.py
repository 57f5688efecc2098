"""A loopback Azure ML workspace for the real ``azure.ai.ml.MLClient`` (tests and benchmarks).

It speaks, over HTTPS on 127.0.0.1 with a throw-away certificate, the parts of the Azure
Resource Manager and Azure ML REST APIs that ``mlpipe submit --target azure`` and
``mlpipe sync`` reach through azure-ai-ml, plus the workspace's MLflow REST API and the subset
of the Blob service that a code upload and an output download use. Payloads are azure-ai-ml's
own REST models.

Starting it (the pytest fixture ``azureml`` in ``tests/conftest.py`` does this once per session)::

    lb = AzureMLLoopback().start()
    os.environ.update(lb.environ())   # ARM_CLOUD_METADATA_URL, REQUESTS_CA_BUNDLE, SSL_CERT_FILE
    client = MLClient(lb.credential(), lb.subscription_id, lb.resource_group, lb.workspace_name)

The workspace starts with computes ``cpu-cluster`` and ``gpu-cluster``, environments
``defect-cpu:4`` and ``defect-gpu:7`` and data assets ``defect-images:1``, ``defect-split:1``
and ``:2``; ``add_compute``, ``add_environment``, ``add_data`` add more, ``reset()`` forgets
everything (jobs, faults, requests, blobs).

Test-facing API:

- Jobs. ``lb.last_job`` is the newest submitted pipeline job, ``lb.job(name)`` any job.
  ``job.child("train")`` is the child job of node ``train`` (created as the service creates it
  when the node is scheduled; ``job.child("inner.fit")`` inside a nested pipeline, whose node
  ``inner`` is a child of kind ``SubGraph`` listed with run property ``runSource:
  SubGraphCloud``). Run history lists children by run id (GUIDs), with ``outputs: null`` and
  ``services: {}``, as the recorded service does; a job's outputs are in its ``rundata``
  (asset ids: ``lb.output_asset_id(job, port)``).
- Lives. ``start()`` (Running; a parent starts with its first child), ``complete()``,
  ``fail(message)``, ``cancel()``, ``set_status(status, message)``, ``end_unstarted()`` (ended
  without starting: no MLflow run, ``runs/get`` answers 404);
  ``child.reuse(original_job)`` marks a child reused as the service does (Completed at once,
  ``azureml.isreused``, ``azureml.reusedrunid``, ``azureml.reusednodeid``,
  ``azureml.reusedpipelinerunid`` in its run properties, the original's outputs). The pipeline
  job's own status is the test's to set (``job.complete()``). ``job.script(f1, f2, ...)``
  applies one step per GET of the job, so a client that follows the job (``--wait``) sees a
  life unfold without timing.
- What a step logged. ``log_metric(key, value, step=0)``, ``set_tag(key, value)``,
  ``log_param(key, value)`` on the job's MLflow run (served by ``api/2.0/mlflow/runs/get``,
  ``metrics/get-history``, ``artifacts/list``); ``log_artifact(path, bytes)``;
  ``set_output(port, uri=None, files={"MLmodel": b"..."})`` sets an output's location and
  puts files there in the default datastore (``lb.datastore_files(uri)`` reads them back).
- Running a step for real. ``run_node(job, folder)`` (``loopback.azureml.runner``) runs a
  child job's component command as a compute node would: the uploaded code snapshot, inputs
  copied from the datastore, outputs uploaded to it, ``MLFLOW_TRACKING_URI`` on the workspace's
  MLflow (``api/2.0/mlflow/runs/log-batch`` is served), then ``complete()`` or ``fail()``.
- Downloads. azure-ai-ml reaches the datastore at ``https://<account>.blob.<storage suffix>``:
  ``environ()`` sets ``HTTPS_PROXY`` to the service's proxy, which tunnels that host (and only
  it) to the service, whose certificate names it; ``lb.tunnels`` lists the tunnels opened.
- Faults. ``lb.fail(status, match=r"PUT .*/jobs/", times=1, retry_after=None, code=None,
  message=None)`` answers the next ``times`` requests whose ``"METHOD /path"`` matches with
  that status and an ARM (or MLflow) error body; ``times=None`` for all of them.
  ``lb.clear_faults()``.
- What the client sent. ``lb.requests`` (method, path, query, status, body of each request),
  ``lb.assets`` (codes, components and model versions the client registered: a model's
  ``models/{name}/versions`` list, get and create, its files uploaded to the datastore first),
  ``lb.blobs`` (uploaded files).
"""
from loopback.azureml.credential import StaticTokenCredential
from loopback.azureml.jobs import STATUSES, TERMINAL, Job
from loopback.azureml.runner import NodeFailed, run_node
from loopback.azureml.service import AzureMLLoopback, Fault, Request

__all__ = ["STATUSES", "TERMINAL", "AzureMLLoopback", "Fault", "Job", "NodeFailed", "Request",
           "StaticTokenCredential", "run_node"]
