"""Prompt-flow nodes (a ``flow.dag.yaml`` run as a pipeline job's parallel node) are carried
through as the other kinds that run only on Azure ML are: their interface is what the job
binds, they are noted (MP603), exported referencing the flow where it is (its folder holds its
nodes' code) and loaded back equal field by field; a flow's ``run.yml`` given alone is refused
naming what it is, not as a command component without a command."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import yaml

FLOW = Path(__file__).resolve().parents[2] / "fixtures" / "azure" / "flow"


def mlpipe(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mlpipe.cli", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


def test_a_flow_node_is_checked_noted_and_exported_as_written(tmp_path):
    from backends.azure.fidelity import field_differences
    from backends.azure.test_command_jobs import loaded

    shutil.copytree(FLOW, tmp_path / "job")
    checked = mlpipe(tmp_path / "job", "check", "pipeline.yml")
    assert checked.returncode == 0, checked.stdout
    assert ("info[MP603] azure-only-step: step 'classify_urls' is a prompt flow "
            "(./web_classification/flow.dag.yaml)") in checked.stdout
    assert "error[" not in checked.stdout and "warning[" not in checked.stdout
    done = mlpipe(tmp_path / "job", "compile", "pipeline.yml", "--out", "build")
    assert done.returncode == 0, done.stderr
    doc = yaml.safe_load((tmp_path / "job" / "build" / "pipeline.yml").read_text())
    assert doc["jobs"]["classify_urls"]["component"] == "../web_classification/flow.dag.yaml"
    assert not (tmp_path / "job" / "build" / "components").exists()
    assert field_differences(loaded(tmp_path / "job" / "pipeline.yml"),
                             loaded(tmp_path / "job" / "build" / "pipeline.yml")) == []


def test_a_flow_run_given_alone_is_refused_saying_what_it_is():
    done = mlpipe(FLOW, "check", "run.yml")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.startswith("error: run.yml: run.yml is a prompt flow run, not an Azure "
                                  "ML job: mlpipe reads a flow as a node of a pipeline job")
