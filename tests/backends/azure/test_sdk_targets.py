"""azure-ai-ml pipelines as teams write them (issue 39): the job a notebook submits
(``job = team_pipeline(...)`` then its settings), a function that returns it, an
``@dsl.pipeline`` whose data input is given at submission; read as azure-ai-ml would submit
the job (its REST body), written where only this user reads it, keyed by everything written,
and never polluting the command's own output."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SDK = ROOT / "tests" / "fixtures" / "azure" / "sdk"
FILE = "tests/fixtures/azure/sdk/teams.py"
CLOUD = "wasbs://images@teamdata.blob.core.windows.net/defects/2026-11/"


def mlpipe(cwd: Path, *args: str, cache: Path | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("MLPIPE_STORE_URL", "MLPIPE_HOME")}
    if cache is not None:
        env["XDG_CACHE_HOME"] = str(cache)
    return subprocess.run([sys.executable, "-m", "mlpipe.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def line_of(text: str, path: Path = SDK / "teams.py") -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def built(name: str):
    """The job azure-ai-ml builds from the fixture (its module under its own name)."""
    import importlib.util

    from mlpipe.backends.azure.validate import quiet_azure_ai_ml

    quiet_azure_ai_ml()
    found = importlib.util.spec_from_file_location("sdk_fixture_teams", SDK / "teams.py")
    module = importlib.util.module_from_spec(found)
    found.loader.exec_module(module)
    value = getattr(module, name)
    return value() if callable(value) else value


def loaded_yaml(path: Path):
    import yaml

    return yaml.safe_load(path.read_text())


def loaded(path: Path):
    from mlpipe.backends.azure.validate import quiet_azure_ai_ml

    quiet_azure_ai_ml()
    from azure.ai.ml import load_job

    return load_job(path)


@pytest.mark.parametrize(("target", "raw", "shuffle"), [
    ("job", CLOUD, False),  # the module's job, its settings set after the call
    ("generate_dsl_pipeline", "https://teamdata.blob.core.windows.net/x/y", True),
    ("team_pipeline", None, True),  # raw: given at submission (--input raw=...)
])
def test_each_form_a_team_writes_is_read_as_the_job_it_builds(target, raw, shuffle):
    from mlpipe.checks import check_pipeline
    from mlpipe.loader import load_spec

    spec, found = load_spec(f"{SDK / 'teams.py'}:{target}")
    assert [s.name for s in spec.steps] == ["cleaned", "fit"]
    inputs = {i.name: i for i in spec.inputs}
    assert (inputs["raw"].default, inputs["raw"].required) == (raw, raw is None)
    assert inputs["shuffle"].default is shuffle  # a boolean, not 0
    _, checked = check_pipeline(spec)
    errors = [d for d in found + checked if d.severity.value == "error"]
    assert errors == []  # no "MP111 ... has no input 'raw'" for an input given later
    assert spec.step("fit").location.line == line_of("fit = train(data=")


@pytest.mark.parametrize("target", ["job", "generate_dsl_pipeline"])
def test_compile_round_trips_the_rest_body_azure_ai_ml_builds(tmp_path, target):
    from backends.azure.fidelity import field_differences

    done = mlpipe(tmp_path, "compile", f"{SDK / 'teams.py'}:{target}", "--out", "build",
                  cache=tmp_path / "cache")
    assert done.returncode == 0, done.stderr
    job, back = built(target), loaded(tmp_path / "build" / "pipeline.yml")
    # every field of both forms (the REST body included) is the same, except what loading
    # any inline component from a file changes: azure-ai-ml names it anonymous
    differences = field_differences(job, back)
    assert {re.sub(r"^.*\.", "", d.split(":")[0]) for d in differences} <= {
        "name", "version", "_source"}, differences
    rest = back._to_rest_object().as_dict()["properties"]
    fit = rest["jobs"]["fit"]
    assert (fit["display_name"], fit["resources"]["instance_type"]) == (
        "fit on the cleaned data", "Standard_NC6s_v3")
    assert (rest["displayName"], rest["tags"]["owner"]) == ("Team pipeline", "vision")
    assert rest["inputs"]["raw"]["uri"] == job.inputs.raw._data.path  # the URI, exactly
    assert back.inputs.shuffle._data is (target != "job")
    assert rest["settings"]["default_compute"] == job.settings.default_compute
    # another machine can submit it: the code folder relative to the output folder
    text = (tmp_path / "build" / "pipeline.yml").read_text()
    assert not re.search(r"(code|path): /", text), text
    written = loaded_yaml(tmp_path / "build" / "pipeline.yml")["jobs"]
    assert {written[n]["component"]["code"] for n in ("cleaned", "fit")} == {
        os.path.relpath(SDK / "src", tmp_path / "build")}


@pytest.mark.parametrize(("target", "message"), [
    ("needs_arguments", "needs_arguments() needs the argument(s) compute, so mlpipe cannot "
                        "build the job it returns"),
    ("not_a_job", "not_a_job() built a dict, not an azure-ai-ml pipeline job"),
])
def test_a_target_that_builds_no_job_is_one_located_error(target, message):
    done = mlpipe(ROOT, "check", f"{FILE}:{target}")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.startswith(f"error: {FILE}:{line_of(f'def {target}(')}: {message}")


def test_an_input_default_azure_ai_ml_refuses_is_located_in_the_users_file(tmp_path):
    (tmp_path / "p.py").write_text(
        "from azure.ai.ml import Input, dsl\n\n\n"
        "@dsl.pipeline(default_compute='cpu')\n"
        "def p(raw=Input(type='uri_file', path='https://x.blob.core.windows.net/a/b.csv')):\n"
        "    pass\n")
    done = mlpipe(tmp_path, "check", "p.py:p", cache=tmp_path / "cache")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "site-packages" not in done.stderr
    assert re.match(r"error: p\.py:[45]: importing p\.py raised UserErrorException: Default "
                    r"value of Input 'raw' cannot be set", done.stderr), done.stderr


def test_json_output_is_the_diagnostics_alone_whatever_the_module_prints(tmp_path):
    done = mlpipe(ROOT, "check", f"{FILE}:generate_dsl_pipeline", "--format", "json",
                  cache=tmp_path / "cache")
    assert done.returncode == 0, done.stderr
    assert [d["code"] for d in json.loads(done.stdout)] == ["MP802"]
    assert "building the team pipeline" in done.stderr


INNER = """from pathlib import Path

from azure.ai.ml import Input, Output, command, dsl

train = command(
    name="train", code=str(Path(__file__).parent), command="python t.py ${{inputs.data}} "
    "${{inputs.epochs}} ${{outputs.model}}",
    inputs={"data": Input(type="uri_folder"), "epochs": 3},
    outputs={"model": Output(type="uri_folder")}, environment="azureml:env:1")


@dsl.pipeline()
def inner(data: Input(type="uri_folder")):
    fit = train(data=data, epochs=EPOCHS)
    return {"model": fit.outputs.model}
"""

OUTER = """from azure.ai.ml import Input, dsl

from inner import inner


@dsl.pipeline(default_compute="cpu-cluster")
def outer():
    step = inner(data=Input(type="uri_folder", path="azureml:images:3"))
    return {"model": step.outputs.model}
"""


def test_an_edit_inside_a_nested_pipeline_is_seen_by_the_next_check(tmp_path):
    project, cache = tmp_path / "project", tmp_path / "cache"
    project.mkdir()
    (project / "outer.py").write_text(OUTER)
    (project / "inner.py").write_text(INNER.replace("EPOCHS", "5"))
    first = mlpipe(project, "check", "outer.py:outer", cache=cache)
    assert first.returncode == 0, first.stdout + first.stderr
    (project / "inner.py").write_text(INNER.replace("EPOCHS", '"many"'))
    second = mlpipe(project, "check", "outer.py:outer", cache=cache)
    assert second.returncode == 1
    assert ("error[MP201] param-type-mismatch: parameter 'step.fit.epochs': 'many' is a str, "
            "not an int") in second.stdout
    assert f"--> inner.py:{line_of('fit = train(', project / 'inner.py')}" in second.stdout
    # written in this user's cache, one folder per content
    assert len(list((cache / "mlpipe-sdk").iterdir())) == 2


def test_a_declared_input_of_another_kind_than_its_port_is_a_warning_not_a_refusal(tmp_path):
    (tmp_path / "p.py").write_text(
        "from azure.ai.ml import Input, Output, command, dsl\n\n"
        "show = command(command='ls ${{inputs.data}}', environment='azureml:env:1',\n"
        "               inputs={'data': Input(type='uri_folder')})\n\n\n"
        "@dsl.pipeline(default_compute='cpu')\n"
        "def p(csv: Input(type='uri_file')):\n"
        "    listed = show(data=csv)\n")
    done = mlpipe(tmp_path, "check", "p.py:p", cache=tmp_path / "cache")
    assert done.returncode == 0, done.stdout + done.stderr
    assert ("warning[MP302] pipeline-input-kind-conflict: pipeline input 'csv' is declared "
            "uri_file but feeds 'listed.data' (uri_folder)") in done.stdout


def test_a_nested_pipeline_name_compile_would_refuse_is_refused_by_check(tmp_path):
    (tmp_path / "inner.py").write_text(INNER.replace("EPOCHS", "5").replace(
        "@dsl.pipeline()", '@dsl.pipeline(name="prep-and-train")'))
    (tmp_path / "outer.py").write_text(OUTER)
    done = mlpipe(tmp_path, "check", "outer.py:outer", cache=tmp_path / "cache")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr == (
        f"error: outer.py:{line_of('step = inner(', tmp_path / 'outer.py')}: node 'step' is a "
        f"nested pipeline named 'prep-and-train', a name azure-ai-ml refuses for a component "
        f"(lowercase letters, digits and underscores, starting with a letter): compile would "
        f"write a component file that azure-ai-ml cannot load\n"
        f"  help: name it 'prep_and_train': @dsl.pipeline(name='prep_and_train')\n")


COUNTED = """from pathlib import Path

from azure.ai.ml import Input, Output, command, dsl

count = command(
    name="count", code=str(Path(__file__).parent / "src"),
    command="python count.py --raw ${{inputs.raw}} --out ${{outputs.out}}",
    inputs={"raw": Input(type="uri_folder")}, outputs={"out": Output(type="uri_folder")},
    environment="azureml:env:1")


@dsl.pipeline(default_compute="cpu-cluster")
def counted(raw: Input(type="uri_folder")):
    c = count(raw=raw)
    return {"out": c.outputs.out}
"""
COUNT = """import argparse
import pathlib

parser = argparse.ArgumentParser()
parser.add_argument("--raw")
parser.add_argument("--out")
args = parser.parse_args()
rows = sum(len(f.read_text().splitlines()) for f in pathlib.Path(args.raw).glob("*.csv"))
pathlib.Path(args.out, "rows.txt").write_text(str(rows))
"""


def test_a_dsl_pipelines_input_is_given_at_submission_with_input(tmp_path):
    (tmp_path / "mlpipe.toml").write_text("")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "count.py").write_text(COUNT)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.csv").write_text("1\n2\n3\n")
    (tmp_path / "p.py").write_text(COUNTED)
    missing = mlpipe(tmp_path, "submit", "p.py:counted", cache=tmp_path / "cache")
    assert missing.returncode == 2
    assert missing.stderr.startswith("error: pipeline 'counted' needs --input raw=...")
    done = mlpipe(tmp_path, "submit", "p.py:counted", "--input", "raw=data",
                  cache=tmp_path / "cache")
    assert done.returncode == 0, done.stdout + done.stderr
    assert [p.read_text() for p in (tmp_path / "evidence").rglob("rows.txt")] == ["3"]


def test_a_function_of_a_module_that_uses_no_azure_ai_ml_is_never_called(tmp_path):
    from mlpipe.backends.azure.validate import quiet_azure_ai_ml
    from mlpipe.errors import LoadError
    from mlpipe.loader import load_spec

    quiet_azure_ai_ml()  # imported in this process: the module's own names decide, not that
    (tmp_path / "helpers_only.py").write_text(
        "def helper():\n    raise RuntimeError('called')\n")
    with pytest.raises(LoadError, match=r"helpers_only\.py has no @pipeline named 'helper'"):
        load_spec(f"{tmp_path / 'helpers_only.py'}:helper")


def test_a_cache_that_cannot_be_written_is_one_error_with_its_fix(tmp_path):
    (tmp_path / "not-a-folder").write_text("")
    done = mlpipe(ROOT, "check", f"{FILE}:job", cache=tmp_path / "not-a-folder")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.startswith(
        f"error: {FILE}:{line_of('job = team_pipeline(')}: cannot write the job azure-ai-ml "
        f"built for job under {tmp_path / 'not-a-folder' / 'mlpipe-sdk'}: "), done.stderr
    assert done.stderr.endswith("  help: set XDG_CACHE_HOME to a folder this user can write\n")


def test_only_local_paths_are_made_relative_to_where_the_job_is_written():
    from mlpipe.backends.azure.sdk_body import relative_local_paths

    arm = "/subscriptions/s/resourceGroups/r/providers/x/data/d/versions/1"
    doc = {"code": "/work/team/src", "jobs": {"fit": {"inputs": {
        "arm": {"path": arm}, "local": {"path": "/work/team/data/"},
        "cloud": {"path": CLOUD}, "bound": {"path": "${{parent.inputs.raw}}"}}}},
        "source": {"path": "/dbo/table"}}  # a data transfer's: its connection's, not a file
    relative_local_paths(doc, Path("/home/me/.cache/mlpipe-sdk/_"))
    assert doc == {"code": "../../../../../work/team/src", "jobs": {"fit": {"inputs": {
        "arm": {"path": arm}, "local": {"path": "../../../../../work/team/data/"},
        "cloud": {"path": CLOUD}, "bound": {"path": "${{parent.inputs.raw}}"}}}},
        "source": {"path": "/dbo/table"}}


def test_a_run_records_the_users_files_never_the_job_written_in_the_cache(tmp_path,
                                                                          monkeypatch):
    """The YAML written from the user's Python is made from it, not code of the user's: a
    run's code revision lists the Python files (and code folders), so the evidence never says
    a file mlpipe wrote is "outside" the commit (a false MP717)."""
    from mlpipe.backends.azure.validate import quiet_azure_ai_ml
    from mlpipe.evidence.storage.revision import pipeline_files
    from mlpipe.loader import load_spec

    quiet_azure_ai_ml()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    spec, _ = load_spec(f"{SDK / 'pipelines.py'}:nested")
    assert list((tmp_path / "cache" / "mlpipe-sdk").rglob("*.yml"))  # it was written there
    files = pipeline_files(spec)
    assert str(SDK / "pipelines.py") in files and str(SDK / "src") in files
    assert [f for f in files if f.startswith(str(tmp_path))] == []
