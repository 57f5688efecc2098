"""``FakeAzureML``: a fake of the Azure ML service only (no test here can reach Azure).

It answers the ``JobsService`` calls with JSON payloads recorded in the shape the service
returns them (``tests/fixtures/azure/responses/``). Tests change a copy of those payloads to
stage a job's life: created, running, completed, a step reused from an earlier job.
"""
from __future__ import annotations

import copy
import json
import pathlib

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

    def __init__(self, failure=None, create_failure=None, job_name="sincere_lamp_7k2m9"):
        self.failure = failure
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
        return copy.deepcopy(self.runs[run_id])
