"""``FakeAzureML``: a fake of the Azure ML service only (no test here can reach Azure).

It answers the ``JobsService`` calls with JSON payloads recorded in the shape the service
returns them (``tests/fixtures/azure/responses/``). Tests change a copy of those payloads to
stage a job's life: created, running, completed, a step reused from an earlier job. For the
parity tests it also stages child jobs whose outputs lie in local folders (what a job's
datastore held: ``fetch_output`` copies them, as ``MLClient.jobs.download`` would) and answers
MLflow's ``runs/get`` from a real MLflow tracking server (``mlflow_uri``).
"""
from __future__ import annotations

import copy
import json
import pathlib
import shutil
import urllib.request

from mlpipe.backends.azure.service import azure_failure
from mlpipe.backends.azure.workspace import Workspace

RESPONSES = pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "azure" / "responses"
WS = Workspace("00000000-0000-0000-0000-000000000000", "rg-ml", "ws-defects")


def payload(name):
    return json.loads((RESPONSES / name).read_text())


class FakeAzureML:
    """A fake of the Azure ML service, answering with recorded payloads.

    Args:
        failure: an azure-core exception ``check_access`` raises (no credentials/network).
        create_failure: an azure-core exception ``create`` raises (after access was fine).
        job_name: the name the created pipeline job gets.
    """

    def __init__(self, failure=None, create_failure=None, job_name="sincere_lamp_7k2m9",
                 mlflow_uri=None):
        self.failure = failure
        self.mlflow_uri = mlflow_uri
        self.folders = {}  # (job name, output) -> the local folder that holds it
        self.create_failure = create_failure
        self.created = []
        self.pipeline = payload("pipeline_job.json")
        self.pipeline["name"] = job_name
        self.child_jobs = payload("child_jobs.json")
        self.runs = payload("mlflow_runs.json")
        if job_name != "sincere_lamp_7k2m9":
            self.runs[job_name] = copy.deepcopy(self.runs.pop("sincere_lamp_7k2m9"))
        self.calls = []

    # --- staging ------------------------------------------------------------------------------

    def child(self, node):
        return next(c for c in self.child_jobs if c["properties"]["displayName"] == node)

    def set_status(self, status, **children):
        """The pipeline job's status, and each named child's (``train="Running"``)."""
        self.pipeline["properties"]["status"] = status
        for node, child_status in children.items():
            self.child(node)["properties"]["status"] = child_status

    def stage_children(self, children):
        """Replace the child jobs: ``[{"name", "node", "status", "compute", "outputs": {port:
        (kind, local path)}}]``; each output gets a datastore URI and is served from its
        path by ``fetch_output``."""
        template = self.child_jobs[0]
        staged = []
        for child in children:
            job = copy.deepcopy(template)
            name, node = child["name"], child["node"]
            job["name"] = name
            job["id"] = template["id"].rsplit("/", 1)[0] + "/" + name
            props = job["properties"]
            props.update(displayName=node, status=child.get("status", "Completed"),
                         computeId=template["properties"]["computeId"].rsplit("/", 1)[0]
                         + "/" + child.get("compute", "cpu-cluster"))
            props["tags"] = {"azureml.nodeid": node}
            props["properties"] = {"azureml.nodeid": node,
                                   "azureml.pipelinerunid": self.pipeline["name"]}
            props["outputs"] = {}
            for port, (kind, path) in child.get("outputs", {}).items():
                props["outputs"][port] = {
                    "jobOutputType": kind,
                    "uri": f"azureml://datastores/workspaceblobstore/paths/azureml/{name}/{port}/"}
                self.folders[(name, port)] = pathlib.Path(path)
            staged.append(job)
        self.child_jobs = staged

    # --- the JobsService calls ----------------------------------------------------------------

    def check_access(self):
        self.calls.append("check_access")
        if self.failure is not None:
            raise azure_failure(self.failure, WS)

    def create(self, job, experiment):
        self.calls.append("create")
        if self.create_failure is not None:
            raise azure_failure(self.create_failure, WS)
        self.created.append((job, experiment))
        self.pipeline["properties"]["status"] = "NotStarted"
        self.pipeline["properties"]["tags"] = dict(job.tags)
        return copy.deepcopy(self.pipeline)

    def get(self, name):
        self.calls.append(f"get {name}")
        assert name == self.pipeline["name"], f"the fake knows job {self.pipeline['name']}"
        return copy.deepcopy(self.pipeline)

    def children(self, name):
        self.calls.append(f"children {name}")
        return copy.deepcopy(self.child_jobs)

    def metrics(self, run_id):
        self.calls.append(f"metrics {run_id}")
        if self.mlflow_uri is not None and run_id not in self.runs:
            url = f"{self.mlflow_uri}/api/2.0/mlflow/runs/get?run_id={run_id}"
            try:
                with urllib.request.urlopen(url, timeout=30) as answer:
                    return json.load(answer)
            except OSError:
                return {}
        return copy.deepcopy(self.runs.get(run_id, {}))

    def fetch_output(self, job_name, output, into):
        self.calls.append(f"fetch {job_name} {output}")
        source = self.folders.get((job_name, output))
        if source is None or not source.exists():
            return None
        target = pathlib.Path(into) / "named-outputs" / output
        if source.is_dir():
            shutil.copytree(source, target)
        else:  # a uri_file output arrives as a folder holding the file, as azure-ai-ml has it
            target.mkdir(parents=True)
            shutil.copy2(source, target / source.name)
        return target
