"""azure-ai-ml Python pipelines (``FILE.py:FUNCTION`` naming an ``@dsl.pipeline``): built
offline by azure-ai-ml and read as their job YAML, so every check applies (located in the
user's file, at the line that assigns the node), ``compile`` writes what azure-ai-ml's own dump
of the same job loads as, and they run here under the local launcher."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SDK = ROOT / "tests" / "fixtures" / "azure" / "sdk"
FILE = "tests/fixtures/azure/sdk/pipelines.py"


def mlpipe(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("MLPIPE_STORE_URL", "MLPIPE_HOME")}
    return subprocess.run([sys.executable, "-m", "mlpipe.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def line_of(text: str) -> int:
    return next(i for i, line in enumerate((SDK / "pipelines.py").read_text().splitlines(), 1)
                if text in line)


def loaded(path):
    from mlpipe.backends.azure.validate import quiet_azure_ai_ml

    quiet_azure_ai_ml()
    from azure.ai.ml import load_job

    return load_job(path)


def built(name: str):
    """The job azure-ai-ml builds from the fixture's function (its module under its own name:
    the checkout has a ``pipelines`` package too)."""
    import importlib.util

    found = importlib.util.spec_from_file_location("sdk_fixture_pipelines", SDK / "pipelines.py")
    module = importlib.util.module_from_spec(found)
    found.loader.exec_module(module)
    return getattr(module, name)()


def test_a_dsl_pipeline_is_read_as_its_job_and_checked_with_every_check():
    from mlpipe.checks import check_pipeline
    from mlpipe.loader import load_spec

    spec, found = load_spec(f"{SDK / 'pipelines.py'}:flat")
    assert [s.name for s in spec.steps] == ["cleaned", "fit"]
    fit = spec.step("fit").target
    assert (fit.instances, fit.distribution.processes_per_instance()) == (1, 2)
    assert fit.distribution.writer_policy("model") == "rank0"  # from the builder's tags
    _, checked = check_pipeline(spec)
    assert [d.code for d in found + checked if d.severity.value != "info"] == []
    assert spec.step("fit").location.line == line_of("fit = train(data=cleaned")
    # help in azure-ai-ml's terms, at the user's line
    (size,) = [d for d in checked if d.code == "MP516"]
    assert (size.file, size.line) == (FILE, line_of("fit = train(data="))
    assert size.hint == ("pass instance_type='Standard_...' (its VM size) to command(), so that "
                         "the GPU and network checks can run")


def test_a_nested_pipeline_is_read_with_its_nodes_located_in_its_own_function():
    from mlpipe.checks import check_pipeline
    from mlpipe.loader import load_spec

    spec, _ = load_spec(f"{SDK / 'pipelines.py'}:nested")
    inner = spec.step("inner").target
    assert [s.name for s in inner.steps] == ["cleaned", "fit"]
    assert inner.step("fit").location.line == line_of("fit = train(data=cleaned.outputs.clean)")
    _, checked = check_pipeline(spec)
    assert [d.code for d in checked if d.severity.value != "info"] == []


def test_a_finding_points_at_the_users_file_and_line():
    done = mlpipe(ROOT, "check", f"{FILE}:miswired")
    assert done.returncode == 1
    line = line_of('epochs="many"')
    assert ("error[MP201] param-type-mismatch: parameter 'fit.epochs': 'many' is a str, not an "
            f"int\n  --> {FILE}:{line}") in done.stdout


def test_a_function_azure_ai_ml_cannot_build_is_one_located_error():
    done = mlpipe(ROOT, "check", f"{FILE}:raises")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.startswith(
        f"error: {FILE}:{line_of('cleaned.outputs.missing')}: azure-ai-ml could not build the "
        f"pipeline job of raises(): UnexpectedAttributeError: Got an unexpected attribute "
        f"'missing', valid attributes: 'clean'.")


def test_compile_writes_what_azure_ai_mls_own_dump_of_the_job_loads_as(tmp_path):
    from backends.azure.fidelity import field_differences

    done = mlpipe(tmp_path, "compile", f"{SDK / 'pipelines.py'}:flat", "--out", "build")
    assert done.returncode == 0, done.stderr
    job = built("flat")
    job.dump(tmp_path / "own.yml")  # azure-ai-ml's own YAML of the same job
    assert field_differences(loaded(tmp_path / "own.yml"),
                             loaded(tmp_path / "build" / "pipeline.yml")) == []


def test_a_nested_pipeline_compiles_to_a_pipeline_component_file(tmp_path):
    from backends.azure.fidelity import field_differences

    done = mlpipe(tmp_path, "compile", f"{SDK / 'pipelines.py'}:nested", "--out", "build")
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in (tmp_path / "build" / "components").iterdir()) == [
        "prepare_and_train.yml"]
    # azure-ai-ml's own dump of a nested job does not load back (it writes the pipeline
    # component inline); against the job it built, only what loading a file changes differs:
    # azure-ai-ml names a component read from YAML anonymous and records where it came from
    differences = field_differences(built("nested"), loaded(tmp_path / "build" /
                                                            "pipeline.yml"))
    assert {re.sub(r"^.*\.", "", d.split(":")[0]) for d in differences} <= {
        "name", "version", "_source"}, differences


@pytest.mark.slow
def test_a_dsl_pipeline_runs_here_under_the_local_launcher(tmp_path):
    pytest.importorskip("torch")
    (tmp_path / "mlpipe.toml").write_text("")
    done = mlpipe(tmp_path, "submit", f"{SDK / 'pipelines.py'}:flat")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "'fit' is launched as 2 process(es) the way Azure ML would" in done.stderr
    models = list((tmp_path / "evidence" / "artifacts").rglob("model.txt"))
    assert [m.read_text() for m in models] == ["rows=4 epochs=5 world=2\n"]
