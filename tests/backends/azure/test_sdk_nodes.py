"""Node kinds of azure-ai-ml pipelines besides command (issue 39), built with azure-ai-ml's own
builders (``tests/fixtures/azure/sdk/kinds.py``): a sweep and an AutoML node are carried
through (checked, compiled, loaded back by azure-ai-ml), a prompt flow and an internal
component are refused in one located error that names the node and the limitation. The
corpus test (``test_sdk_corpus.py``) carries parallel, Spark and data transfer nodes of
azure-ai-ml's own test configurations; ``test_sdk_pipelines.py`` pipeline components."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
FILE = "tests/fixtures/azure/sdk/kinds.py"


def mlpipe(cwd: Path, *args: str, env: dict[str, str] | None = None
           ) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k not in ("MLPIPE_STORE_URL", "MLPIPE_HOME")}
    base["XDG_CACHE_HOME"] = str(cwd / ".cache")
    return subprocess.run([sys.executable, "-m", "mlpipe.cli", *args], cwd=ROOT,
                          env={**base, **(env or {})}, capture_output=True, text=True,
                          timeout=300)


def line_of(text: str) -> int:
    lines = (ROOT / FILE).read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line)


@pytest.mark.parametrize(("target", "node", "kind"), [
    ("with_sweep", "tuned", "a sweep job"),
    ("with_automl", "classify", "an AutoML job"),
])
def test_a_sweep_and_an_automl_node_are_carried_through_to_a_job_azure_ai_ml_loads(
        tmp_path, target, node, kind):
    checked = mlpipe(tmp_path, "check", f"{FILE}:{target}")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"step '{node}' is {kind}: mlpipe checks its wiring and exports it" in checked.stdout
    assert f"--> {FILE}:{line_of(f'    {node} = ')}" in checked.stdout  # the node's own line
    out = tmp_path / "build"
    done = mlpipe(tmp_path, "compile", f"{FILE}:{target}", "--out", str(out))
    assert done.returncode == 0, done.stdout + done.stderr

    from mlpipe.backends.azure.validate import quiet_azure_ai_ml

    quiet_azure_ai_ml()
    from azure.ai.ml import load_job

    back = load_job(out / "pipeline.yml")
    assert back._validate().passed
    assert back.jobs[node].type == ("sweep" if target == "with_sweep" else "automl")


def test_a_prompt_flow_node_is_refused_naming_the_node_and_why(tmp_path):
    done = mlpipe(tmp_path, "check", f"{FILE}:with_flow")
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stdout == ""
    assert done.stderr.splitlines()[0] == (
        f"error: {FILE}:{line_of('    answer = flow(')}: node 'answer' runs a prompt flow (a "
        "promptflow_parallel component loaded from flow.dag.yaml): azure-ai-ml registers the "
        "flow in a workspace when it submits the job and only then names it, so the job it "
        "builds here holds neither the flow's folder nor its inputs, and mlpipe can neither "
        "check, compile nor run it")
    assert "run the job with azure-ai-ml directly" in done.stderr


def test_a_node_kind_mlpipe_has_no_step_for_is_refused_naming_the_node_and_its_kind(tmp_path):
    done = mlpipe(tmp_path, "check", f"{FILE}:with_scope",
                  env={"AZURE_ML_INTERNAL_COMPONENTS_ENABLED": "true"})
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.splitlines()[0] == (
        f"error: {FILE}:{line_of('    structured = convert(')}: node 'structured' is "
        "'ScopeComponent', a node kind azure-ai-ml builds that mlpipe cannot read: it has no "
        "step that runs it or checks it")
    compiled = mlpipe(tmp_path, "compile", f"{FILE}:with_scope", "--out",
                      str(tmp_path / "build"),
                      env={"AZURE_ML_INTERNAL_COMPONENTS_ENABLED": "true"})
    assert compiled.returncode == 2 and not (tmp_path / "build" / "pipeline.yml").exists()
