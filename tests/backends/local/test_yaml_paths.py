"""Local runs of imported Azure ML YAML: data paths are relative to the YAML file wherever
mlpipe is run from; a cloud reference is never taken for a local file (the error says what it
is and how to give a local copy); ``--input STEP.PORT=PATH`` replaces a path a job writes."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from mlpipe.backends.local.inputs import literal_paths, resolve, split_step_inputs
from mlpipe.errors import UsageError
from mlpipe.evidence.storage import models as m
from mlpipe.evidence.storage.store import Store
from mlpipe.graph import compile_pipeline
from mlpipe.loader import load_spec

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "azure" / "local_paths"
PIPELINE = FIXTURE / "pipeline.yml"


def mlpipe(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("MLPIPE_STORE_URL", "MLPIPE_HOME")}
    return subprocess.run([sys.executable, "-m", "mlpipe.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=180)


@pytest.fixture
def elsewhere(tmp_path):
    """A project folder that is not the YAML's: mlpipe runs from here."""
    (tmp_path / "mlpipe.toml").write_text("")
    return tmp_path


def run_facts(root: Path, run_id: str) -> dict[str, object]:
    store = Store.open(f"sqlite:///{root / 'evidence' / 'store.sqlite'}")
    try:
        with store.session() as s:
            run = s.get(m.Run, run_id)
            (step,) = run.steps
            # an output's location is its key in the artifact root
            ports = {f"{a.direction}.{a.port}": a.artifact.location if a.direction == "input"
                     else str(root / "evidence" / "artifacts" / a.artifact.key)
                     for a in step.artifacts}
            return {"status": run.status, "options": run.options, **ports}
    finally:
        store.close()


def graph_of(text: str, tmp_path: Path):
    (tmp_path / "src").mkdir(exist_ok=True)
    (tmp_path / "pipeline.yml").write_text(text)
    spec, _ = load_spec(str(tmp_path / "pipeline.yml"))
    return compile_pipeline(spec)


# --- from any working directory -----------------------------------------------------------------

@pytest.mark.slow
def test_an_imported_pipeline_runs_from_another_directory_reading_paths_beside_its_yaml(
        elsewhere):
    done = mlpipe(elsewhere, "submit", str(PIPELINE))
    assert done.returncode == 0, done.stderr
    run_id = re.search(r"run (r-[0-9a-f]{10}) succeeded", done.stdout).group(1)
    facts = run_facts(elsewhere, run_id)
    assert facts["input.numbers"] == str(FIXTURE / "data" / "numbers.txt")
    assert facts["input.extra"] == str(FIXTURE / "data" / "extra")
    assert Path(facts["output.out"], "total.txt").read_text() == "12 a.txt,b.txt"
    assert not (FIXTURE / "evidence").exists()  # nothing written beside the YAML

    # a job's literal input replaced from the command line, and the run says it was
    other = elsewhere / "other"
    other.mkdir()
    (other / "c.txt").write_text("c")
    again = mlpipe(elsewhere, "submit", str(PIPELINE), "--input", "count.extra=other")
    assert again.returncode == 0, again.stderr
    run_id = re.search(r"run (r-[0-9a-f]{10}) succeeded", again.stdout).group(1)
    facts = run_facts(elsewhere, run_id)
    assert facts["input.extra"] == str(other)
    assert facts["options"]["input_overrides"] == ["count.extra"]
    assert Path(facts["output.out"], "total.txt").read_text() == "12 c.txt"


# --- cloud references ---------------------------------------------------------------------------

CLOUD = [
    ("azureml:images:3", "an Azure ML data asset"),
    ("azureml:images@latest", "an Azure ML data asset"),
    ("azureml://datastores/workspaceblobstore/paths/images/", "an Azure ML datastore path"),
    ("azureml://registries/shared/data/images/versions/1", "an asset in an Azure ML registry"),
    ("https://example.test/images.zip", "a web URL"),
    ("wasbs://data@account.blob.core.windows.net/images/", "a cloud storage URL (wasbs://)"),
    ("abfss://data@account.dfs.core.windows.net/images/", "a cloud storage URL (abfss://)"),
]


@pytest.mark.parametrize("ref, what", CLOUD)
def test_a_job_input_that_is_a_cloud_reference_says_so_and_how_to_give_a_copy(ref, what,
                                                                             tmp_path):
    text = PIPELINE.read_text().replace("path: ./data/extra", f"path: {ref}")
    graph = graph_of(text, tmp_path)
    with pytest.raises(UsageError, match=(
            rf"^step 'count' input 'extra' is bound to {re.escape(ref)}, which is "
            rf"{re.escape(what)}, not a file or folder on this machine\n  help: download a copy "
            r"and pass --input count.extra=PATH to run it here, or run it on Azure ML with "
            r"--target azure$")):
        literal_paths(graph, {})
    assert literal_paths(graph, {"count.extra": str(tmp_path / "src")}) == {
        ("count", "extra"): str(tmp_path / "src")}


@pytest.mark.parametrize("ref, what", CLOUD[:3])
def test_a_pipeline_input_default_or_given_value_that_is_a_cloud_reference_says_so(ref, what,
                                                                                   tmp_path):
    text = PIPELINE.read_text().replace("path: ./data/numbers.txt", f"path: {ref}")
    spec = graph_of(text, tmp_path).spec
    with pytest.raises(UsageError, match=(
            rf"^input 'numbers' defaults to {re.escape(ref)}, which is {re.escape(what)}, not a "
            r"file or folder on this machine\n  help: download a copy and pass --input "
            r"numbers=PATH to run it here")):
        resolve(spec, {}, {})
    with pytest.raises(UsageError, match=(
            rf"^input 'numbers': {re.escape(ref)} is {re.escape(what)}, not a file or folder on "
            r"this machine\n  help: run it on Azure ML with --target azure, or download a copy "
            r"and pass --input numbers=PATH$")):
        resolve(graph_of(PIPELINE.read_text(), tmp_path).spec, {"numbers": ref}, {})


def test_paths_resolve_against_the_yaml_folder_not_the_current_one(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    graph = compile_pipeline(load_spec(os.path.relpath(PIPELINE))[0])
    paths, _ = resolve(graph.spec, {}, {})
    assert paths == {"numbers": str(FIXTURE / "data" / "numbers.txt")}
    assert literal_paths(graph, {}) == {("count", "extra"): str(FIXTURE / "data" / "extra")}
    gone = PIPELINE.read_text().replace("path: ./data/extra", "path: ./missing")
    with pytest.raises(UsageError, match=(
            rf"^step 'count' input 'extra' is bound to {re.escape(str(tmp_path / 'missing'))}, "
            r"which does not exist\n  help: pass --input count.extra=PATH, or fix the path in "
            r"the pipeline$")):
        literal_paths(graph_of(gone, tmp_path), {})


@pytest.mark.parametrize("given, message", [
    ("count.nope", r"--input count.nope: step 'count' has no data input 'nope' \(data inputs: "
                   r"numbers, extra\)\n  help: give one of those names; parameters are set with "
                   r"--param$"),
    ("train.extra", r"--input train.extra: pipeline 'local-paths' has no step 'train' \(steps: "
                    r"count\)\n  help: give --input STEP.PORT=PATH with one of those steps, or "
                    r"--input NAME=PATH for a pipeline input$"),
    ("count.numbers", r"--input count.numbers: step 'count' input 'numbers' reads "
                      r"inputs.numbers, not a path written in the pipeline\n  help: --input "
                      r"STEP.PORT replaces a path written in the pipeline; give a pipeline input "
                      r"as --input NAME=PATH$"),
])
def test_a_step_input_override_that_names_no_written_path_is_one_clear_error(given, message):
    graph = compile_pipeline(load_spec(str(PIPELINE))[0])
    with pytest.raises(UsageError, match="^" + message):
        literal_paths(graph, {given: str(FIXTURE)})


def test_an_override_that_is_itself_a_cloud_reference_or_missing_is_refused(tmp_path):
    graph = compile_pipeline(load_spec(str(PIPELINE))[0])
    with pytest.raises(UsageError, match=r"^--input count.extra: azureml:images:1 is an Azure ML "
                                         r"data asset, not a file or folder on this machine\n"):
        literal_paths(graph, {"count.extra": "azureml:images:1"})
    with pytest.raises(UsageError, match=r"^--input count.extra: no such file or folder: "):
        literal_paths(graph, {"count.extra": str(tmp_path / "gone")})


def test_step_inputs_are_told_from_pipeline_inputs_by_the_dot():
    assert split_step_inputs({"raw": "a", "count.extra": "b", "outer.inner.data": "c"}) == (
        {"raw": "a"}, {"count.extra": "b", "outer.inner.data": "c"})


@pytest.mark.slow
def test_a_cloud_reference_refuses_the_run_before_anything_is_recorded(elsewhere):
    done = mlpipe(elsewhere, "submit", str(PIPELINE), "--input", "numbers=azureml:numbers:1")
    assert done.returncode == 2
    assert done.stderr.splitlines()[0] == ("error: input 'numbers': azureml:numbers:1 is an "
                                           "Azure ML data asset, not a file or folder on this "
                                           "machine")
    assert "Traceback" not in done.stderr
    assert not (elsewhere / "evidence" / "store.sqlite").exists()


NESTED_OUTER = """type: pipeline
display_name: outer
jobs:
  inner:
    type: pipeline
    component: ./parts/inner.yml
"""
NESTED_INNER = """type: pipeline
name: inner
inputs:
  lookup: {type: uri_folder, path: ./lookup}
outputs:
  out: {type: uri_folder}
jobs:
  count:
    type: command
    command: python count.py --numbers ${{inputs.numbers}} --extra ${{inputs.extra}} --factor 3 --out ${{outputs.out}}
    code: ../src
    environment: azureml:script-env:1
    inputs:
      numbers: {type: uri_file, path: ./numbers.txt}
      extra: ${{parent.inputs.lookup}}
    outputs:
      out: ${{parent.outputs.out}}
"""


@pytest.mark.slow
def test_a_nested_pipeline_reads_paths_beside_its_own_file_and_takes_dotted_overrides(
        tmp_path, elsewhere):
    team = tmp_path / "team"
    (team / "parts" / "lookup").mkdir(parents=True)
    (team / "src").mkdir()
    (team / "src" / "count.py").write_text((FIXTURE / "src" / "count.py").read_text())
    (team / "parts" / "numbers.txt").write_text("1\n2\n")
    (team / "parts" / "lookup" / "x.txt").write_text("x")
    (team / "pipeline.yml").write_text(NESTED_OUTER)
    (team / "parts" / "inner.yml").write_text(NESTED_INNER)
    graph = compile_pipeline(load_spec(str(team / "pipeline.yml"))[0])
    assert literal_paths(graph, {}) == {
        ("inner.count", "numbers"): str(team / "parts" / "numbers.txt"),
        ("inner.count", "extra"): str(team / "parts" / "lookup")}

    done = mlpipe(elsewhere, "submit", str(team / "pipeline.yml"))
    assert done.returncode == 0, done.stderr
    other = elsewhere / "more.txt"
    other.write_text("5\n")
    again = mlpipe(elsewhere, "submit", str(team / "pipeline.yml"),
                   "--input", f"inner.count.numbers={other}")
    assert again.returncode == 0, again.stderr
    run_id = re.search(r"run (r-[0-9a-f]{10}) succeeded", again.stdout).group(1)
    facts = run_facts(elsewhere, run_id)
    assert facts["input.numbers"] == str(other)
    assert Path(facts["output.out"], "total.txt").read_text() == "15 x.txt"
