"""The step runtime installed alone into clean virtual environments, as an Azure ML image gets
it: ``submit --isolate`` builds a step's declared conda environment with the wheel of this
checkout (mlpipe-aml, no authoring extra) and what its contracts need, and a step with a
tabular input and an MLflow model output runs there; the build context ``mlpipe environment``
writes for the same step installs into another clean venv. Slow: both install from the
package index (pip's configured sources)."""
from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from mlpipe.backends.local import isolation
from mlpipe.version import __version__

ROOT = Path(__file__).resolve().parents[2]
FIT = ROOT / "tests" / "fixtures" / "runtime_install" / "fit.py"
#: The authoring side, none of which this step's needs bring either (cryptography does arrive,
#: with azureml-mlflow's azure-identity; what mlpipe-aml itself requires is asserted apart).
AUTHORING = {"azure-ai-ml", "networkx", "psycopg", "psycopg-binary", "jsonschema", "rich",
             "pint"}


def _mlpipe(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("MLPIPE_STORE_URL", "MLPIPE_HOME")}
    return subprocess.run([sys.executable, "-m", "mlpipe.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=1200)


def _run(python: str, code: str) -> str:
    # from "/", so that the checkout's own mlpipe/ folder is not on the path
    return subprocess.run([python, "-c", code], capture_output=True, text=True, check=True,
                          timeout=300, cwd="/").stdout


@pytest.mark.slow
def test_the_runtime_alone_runs_a_step_with_a_tabular_input_and_an_mlflow_model(tmp_path):
    (tmp_path / "rows.csv").write_text("id,x,y\na,1.0,0\nb,3.0,1\nc,5.0,1\n")
    assert _mlpipe(tmp_path, "check", str(FIT)).stdout.strip() == "No problems found."
    done = _mlpipe(tmp_path, "submit", str(FIT), "--input", "rows=rows.csv", "--isolate")
    assert done.returncode == 0, done.stderr[-3000:]
    with sqlite3.connect(tmp_path / "evidence" / "store.sqlite") as db:
        status, interpreter = db.execute("SELECT status, interpreter FROM step_runs").fetchone()
    interpreter = json.loads(interpreter)
    assert (status, interpreter["isolated"]) == ("executed", True)
    python = interpreter["python"]
    packages = {p.split("==")[0]: p.split("==")[1]
                for p in isolation.inspect(python)["packages"]}
    # this checkout's runtime, from its wheel (not an editable source tree)
    assert packages["mlpipe-aml"] == __version__
    where = _run(python, "import mlpipe.runtime.step as s; print(s.__file__)").strip()
    assert where.startswith(str(Path(python).parent.parent)) and "site-packages" in where
    # what the contracts need, and MLflow below 2.19 (the workspace accepts it)
    assert "pyarrow" in packages and packages["mlflow"].split(".")[:2] < ["2", "19"]
    assert not AUTHORING & set(packages), AUTHORING & set(packages)
    # mlpipe-aml itself requires only its base install
    required = _run(python, "import importlib.metadata as m; print('\\n'.join("
                            "r for r in m.requires('mlpipe-aml') if 'extra ==' not in r))")
    assert sorted(r.split(">")[0] for r in required.split()) == ["blake3", "click", "pyyaml"]
    # a command of the authoring side says what to install instead of a traceback (export
    # needs azure-ai-ml, which nothing here brings)
    cli = subprocess.run([str(Path(python).parent / "mlpipe"), "compile", str(FIT), "-o",
                          "build"], cwd=tmp_path, capture_output=True, text=True)
    assert cli.returncode == 2 and "Traceback" not in cli.stderr
    assert ("error: this command needs azure, which is not installed: this is the step "
            "runtime alone (mlpipe-aml without its authoring side)") in cli.stderr
    assert (f"help: pip install 'mlpipe-aml[authoring]=={__version__}' to check, run and "
            f"export pipelines here") in cli.stderr

    # the build context `mlpipe environment` writes for the same step installs in a clean venv
    out = tmp_path / "env"
    made = _mlpipe(tmp_path, "environment", "fit-env", "--version", "1", "-o", str(out),
                   "--pipeline", str(FIT))
    assert made.returncode == 0, made.stderr
    context = out / "context"
    wheel = next(context.glob("mlpipe_aml-*.whl"))
    venv = tmp_path / "image"
    uv = isolation._uv()
    assert uv is not None
    subprocess.run([uv, "venv", "--quiet", "--python", sys.executable, str(venv)], check=True)
    subprocess.run([uv, "pip", "install", "--quiet", "--python", str(venv / "bin" / "python"),
                    "--index-strategy", "unsafe-best-match", *isolation.pip_sources(), str(wheel), "-r",
                    str(context / "requirements.txt")], check=True, timeout=1200)
    assert _run(str(venv / "bin" / "python"),
                "import mlpipe.runtime.step, pyarrow, mlflow.pyfunc, azureml.mlflow; "
                "import importlib.metadata as m; print(m.version('mlpipe-aml'))").strip() == (
        __version__)


@pytest.mark.slow
def test_a_ddp_step_runs_isolated_on_the_runtime_from_the_wheel(tmp_path):
    ddp = ROOT / "tests" / "fixtures" / "runtime_install" / "ddp.py"
    (tmp_path / "src.txt").write_text("3")
    done = _mlpipe(tmp_path, "submit", str(ddp), "--input", "src=src.txt", "--isolate")
    assert done.returncode == 0, done.stderr[-3000:]
    with sqlite3.connect(tmp_path / "evidence" / "store.sqlite") as db:
        status, interpreter = db.execute("SELECT status, interpreter FROM step_runs").fetchone()
    interpreter = json.loads(interpreter)
    assert (status, interpreter["isolated"]) == ("executed", True)
    venv = Path(interpreter["python"]).parent.parent
    written = next((tmp_path / "evidence").rglob("mean.json"))
    result = json.loads(written.read_text())
    assert result["mean"] == 3.5  # (3 + 4) / 2 over both ranks
    # each rank ran the runtime installed in the environment, not this checkout's source
    assert result["runtime"].startswith(str(venv)) and "site-packages" in result["runtime"]
    packages = {p.split("==")[0] for p in isolation.inspect(str(venv / "bin" / "python"))[
        "packages"]}
    # (networkx arrives with torch, which requires it)
    assert {"mlpipe-aml", "torch"} <= packages and not (AUTHORING - {"networkx"}) & packages


@pytest.mark.slow
def test_the_example_runs_isolated_in_the_environments_its_project_declares(tmp_path, request):
    """The example's components name registered environments (defect-cpu:4, defect-gpu:7)
    and no conda file: --isolate builds each from the conda file of its declaration in
    environments/ (what `az ml environment create --file` registers), with this checkout's
    wheel, and both pipelines pass there (the DDP trainer scaled to 1x2 on gloo)."""
    from components.synthetic import make_dataset

    raw, split = make_dataset(tmp_path / "data", per_class=12)
    # loading the MLflow models to validate them makes MLflow's default store in the working
    # folder, the checkout here: removed afterwards unless it was there before
    if not (ROOT / "mlruns").exists():
        request.addfinalizer(lambda: shutil.rmtree(ROOT / "mlruns", ignore_errors=True))
    env = {k: v for k, v in os.environ.items() if k != "MLPIPE_STORE_URL"}
    env["MLPIPE_HOME"] = str(tmp_path / "evidence")
    for pipeline, extra in (("defect_classifier.py", []),
                            ("defect_classifier_ddp.py", ["--local-scale", "train_cnn=1x2"])):
        done = subprocess.run(
            [sys.executable, "-m", "mlpipe.cli", "submit", f"pipelines/{pipeline}", "--input",
             f"raw={raw}", "--input", f"split={split}", "--param", "epochs=2", "--isolate",
             *extra], cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
        assert done.returncode == 0, done.stderr[-3000:]
    with sqlite3.connect(tmp_path / "evidence" / "store.sqlite") as db:
        rows = db.execute("SELECT step, status, interpreter FROM step_runs").fetchall()
    ran = {step: json.loads(interpreter) for step, status, interpreter in rows
           if status == "executed"}
    assert set(ran) == {"prepare", "train", "evaluate", "train_cnn", "evaluate_cnn"}
    for step, interpreter in ran.items():
        assert interpreter["isolated"] is True, step
        gpu = step.endswith("_cnn")
        assert interpreter["declared_environment"] == ("defect-gpu:7" if gpu else
                                                       "defect-cpu:4"), step
        packages = {p.split("==")[0]: p.split("==")[1]
                    for p in isolation.inspect(interpreter["python"])["packages"]}
        assert packages["mlpipe-aml"] == __version__ and "mlflow" in packages, step
        assert ("torch" in packages) == gpu, step
        assert not (AUTHORING - {"networkx"}) & set(packages), step
