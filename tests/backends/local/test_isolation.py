"""``submit --isolate``: a step runs in a virtual environment built from its declared conda
file (once per environment digest), so a script that needs its own packages runs here as on
Azure ML; every executed step's evidence says which interpreter and package set ran it, and
whether that was its declared environment."""
from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from mlpipe.backends.local import isolation
from mlpipe.digests import digest_of
from mlpipe.errors import EnvironmentBuildFailed, UsageError
from mlpipe.graph import compile_pipeline
from mlpipe.loader import load_spec
from mlpipe.spec import ComponentSpec, Environment, Location
from mlpipe.version import __version__

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "azure" / "isolated"
PIPELINE = FIXTURE / "pipeline.yml"


def mlpipe(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("MLPIPE_STORE_URL", "MLPIPE_HOME")}
    return subprocess.run([sys.executable, "-m", "mlpipe.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


def step_rows(root: Path) -> list[tuple[str, str, dict]]:
    with sqlite3.connect(root / "evidence" / "store.sqlite") as db:
        rows = db.execute("SELECT r.id, s.status, s.interpreter FROM step_runs s JOIN runs r "
                          "ON r.id = s.run_id ORDER BY s.started_at").fetchall()
    return [(run, status, json.loads(interp) if interp else None)
            for run, status, interp in rows]


# --- the specification --------------------------------------------------------------------------

@pytest.mark.parametrize("spec, requirement", [
    ("numpy", "numpy"),
    ("numpy=1.26", "numpy==1.26.*"),
    ("numpy=1.26.*", "numpy==1.26.*"),
    ("numpy==1.26.4", "numpy==1.26.4"),
    ("numpy>=1.26", "numpy>=1.26"),
    ("numpy 1.26.4", "numpy==1.26.4.*"),
    ("numpy=1.26.4=py311h64a7726_0", "numpy==1.26.4.*"),
    ("conda-forge::scikit-learn=1.5", "scikit-learn==1.5.*"),
    ("python=3.11", None),
    ("pip", None),
    ("setuptools>=60", None),
])
def test_a_conda_spec_becomes_the_pip_requirement_of_the_same_package(spec, requirement):
    assert isolation.conda_requirement(spec) == requirement


def test_the_conda_file_gives_the_python_version_and_every_requirement(tmp_path):
    conda = tmp_path / "conda.yml"
    conda.write_text("name: x\nchannels: [conda-forge]\ndependencies:\n  - python=3.11\n"
                     "  - pip\n  - numpy=1.26\n  - pip:\n      - termcolor==3.3.0\n"
                     "      - -r extra.txt\n")
    found = isolation.requirements(Environment("x", "1"), conda)
    assert (found.python, found.packages) == ("3.11", ("numpy==1.26.*", "termcolor==3.3.0",
                                                       "-r extra.txt"))


@pytest.mark.parametrize("text, message", [
    ("name: x\n", r"environment 'x:1': its conda file .*conda\.yml has no dependencies: list\n"
                  r"  help: list the packages under dependencies:$"),
    ("dependencies: [\n", r"environment 'x:1': its conda file .*conda\.yml cannot be read "
                          r"\(ParserError: "),
])
def test_a_conda_file_that_is_no_specification_is_one_clear_error(text, message, tmp_path):
    conda = tmp_path / "conda.yml"
    conda.write_text(text)
    with pytest.raises(UsageError, match="^" + message):
        isolation.requirements(Environment("x", "1"), conda)


def _component(tmp_path: Path, env: Environment | None, function: str | None = None):
    return ComponentSpec(name="c", version="1", inputs=(), outputs=(), params=(),
                         code_digest="sha256:0", command=None if function else "python a.py",
                         function=function, environment=env,
                         location=Location(str(tmp_path / "c.yml"), 1))


def test_isolate_names_every_step_whose_environment_cannot_be_built_at_once(tmp_path):
    (tmp_path / "conda.yml").write_text("dependencies: [pip]\n")
    steps = {
        "ok": _component(tmp_path, Environment("", image="img", conda_file="conda.yml")),
        "ref": _component(tmp_path, Environment("AzureML-sklearn", "1")),
        "none": _component(tmp_path, None),
        "gone": _component(tmp_path, Environment("e", "2", conda_file="gone.yml")),
        "fn": _component(tmp_path, Environment("e", "3", conda_file="conda.yml"),
                         function="pipelines.steps:fit"),
    }
    with pytest.raises(UsageError, match=(
            r"^--isolate cannot build the environment of steps 'ref' \(its environment "
            r"'AzureML-sklearn:1' is registered in the workspace and declared nowhere here: "
            r"add its Azure ML environment YAML \(name: AzureML-sklearn, version: 1, image, "
            r"conda_file\) to an environments/ folder at or above the component's file\), "
            r"'none' \(it declares no environment\), "
            r"'gone' \(its conda file .*gone\.yml does not exist\), 'fn' \(its conda file "
            r"lists no mlpipe, which a Python function step's runtime is \(on Azure ML too\)\)"
            r"\n  help: declare each step's environment "
            r"with a conda file that lists what it needs \(inline: image and conda_file; a "
            r"registered one: its Azure ML environment YAML with a conda_file in the project's "
            r"environments/ folder; mlpipe-aml too, for a Python function step\), so it can be "
            r"built here$")):
        isolation.plan(steps, isolate=True, root=tmp_path / "envs")
    assert not (tmp_path / "envs").exists()  # nothing built before the refusal


def test_a_declared_python_version_is_this_interpreter_or_one_found_on_the_path(monkeypatch):
    import platform

    mine = platform.python_version()
    assert isolation._base_python(mine) == sys.executable
    assert isolation._base_python(".".join(mine.split(".")[:2])) == sys.executable
    assert isolation._base_python(None) == sys.executable
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(EnvironmentBuildFailed, match=(
            rf"^the environment declares Python 2\.7; this machine runs {re.escape(mine)} and "
            r"has no python2\.7\n  help: install Python 2\.7, or declare the Python version "
            r"the steps need$")):
        isolation._base_python("2.7")


def test_without_isolate_each_step_says_whether_it_ran_in_its_declared_environment(tmp_path):
    (tmp_path / "conda.yml").write_text("dependencies: [pip]\n")
    plan = isolation.plan({}, isolate=False, root=tmp_path)
    own = isolation.own_interpreter()
    built = _component(tmp_path, Environment("", image="img", conda_file="conda.yml"))
    ref = _component(tmp_path, Environment("AzureML-sklearn", "1"))
    assert plan.evidence("a", built) == {
        "python": sys.executable, "version": own.version, "packages_digest": own.packages,
        "packages": own.package_count, "isolated": False, "built_with": None,
        "declared_environment": "inline: conda.yml", "in_declared_environment": False,
        "note": "ran on mlpipe's own interpreter, not in its declared environment "
                "'inline: conda.yml' (submit --isolate builds it here from its conda file)"}
    assert plan.evidence("b", ref)["note"] == (
        "ran on mlpipe's own interpreter, not in its declared environment 'AzureML-sklearn:1' "
        "(it has no conda file to build it from here)")
    assert plan.evidence("c", _component(tmp_path, None))["in_declared_environment"] is None
    assert (plan.bin_folder("a"), plan.packages("a")) == (None, None)


def test_the_package_set_is_every_installed_distribution_once():
    own = isolation.installed()
    from importlib.metadata import distributions

    expected: dict[str, str] = {}
    for dist in distributions():  # importlib's answer, each metadata file parsed
        name = re.sub(r"[-_.]+", "-", dist.metadata["Name"]).lower()
        expected.setdefault(name, f"{name}=={dist.version}")
    assert own["packages"] == sorted(expected.values())
    assert any(p.startswith("pyyaml==") for p in own["packages"])
    assert isolation.own_interpreter().packages == digest_of(own["packages"])
    # the script run by another interpreter gives the same list as this process
    assert isolation.inspect(sys.executable) == own


def test_the_mlpipe_an_environment_lists_is_this_one(tmp_path):
    # a checkout: the wheel built from it (as an Azure ML image installs it), not its source
    wheel = isolation.mlpipe_requirement(tmp_path)
    assert re.fullmatch(rf"mlpipe-aml @ file://{tmp_path}/wheels/[0-9a-f]{{16}}/"
                        rf"mlpipe_aml-{__version__}-py3-none-any\.whl", wheel)
    assert isolation.mlpipe_requirement(tmp_path) == wheel  # built once for these sources
    # the name "mlpipe" is another project's: left as it is, as Azure ML would install it
    assert isolation._pinned(("termcolor==3.3.0", "mlpipe-aml[azureml]>=0.1", "MLPipe"),
                             tmp_path) == [
        "termcolor==3.3.0", wheel.replace("mlpipe-aml @", "mlpipe-aml[azureml] @"), "MLPipe"]


def test_uv_installs_from_the_package_sources_pip_is_configured_with(monkeypatch):
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", "file:///srv/a/simple file:///srv/b/simple")
    monkeypatch.setenv("PIP_FIND_LINKS", "/srv/wheels")
    found = isolation.pip_sources()
    pairs = list(zip(found[::2], found[1::2]))
    assert [v for k, v in pairs if k == "--extra-index-url"] == ["file:///srv/a/simple",
                                                                 "file:///srv/b/simple"]
    assert [v for k, v in pairs if k == "--find-links"] == ["/srv/wheels"]
    assert {k for k, _ in pairs} <= {"--index-url", "--extra-index-url", "--find-links",
                                     "--constraint"}


@pytest.mark.slow
@pytest.mark.parametrize("installer", ["pip", "uv"])
def test_each_installer_builds_the_environment_once_from_its_conda_file(installer, tmp_path):
    if installer == "uv" and isolation._uv() is None:
        pytest.skip("uv is not installed (the dev extra installs it)")
    env = Environment("", image="img", conda_file=str(FIXTURE / "env" / "conda.yml"))
    built = isolation.build(env, FIXTURE / "env" / "conda.yml", "sha256:e", tmp_path,
                            installer=installer)
    assert built.built_with == ("uv" if installer == "uv" else "venv+pip")
    listed = isolation.inspect(built.python)
    assert "termcolor==3.3.0" in listed["packages"]
    assert built.packages == digest_of(listed["packages"])
    assert built.environment == "sha256:e" and Path(built.python).is_relative_to(tmp_path)
    again = isolation.build(env, FIXTURE / "env" / "conda.yml", "sha256:e", tmp_path,
                            installer=installer)
    assert again == built  # found built: the same interpreter and package set
    log = next(tmp_path.glob("*.log")).read_text()
    assert log.count("$ ") == 2  # one venv, one install
    # a package installed into it since: the package set is listed again, not remembered
    add = ([isolation._uv(), "pip", "install", "--python", built.python] if installer == "uv"
           else [built.python, "-m", "pip", "install", "-q"])
    subprocess.run([*add, *isolation.pip_sources(), "six"], check=True, capture_output=True)
    changed = isolation.build(env, FIXTURE / "env" / "conda.yml", "sha256:e", tmp_path,
                              installer=installer)
    assert changed.package_count == built.package_count + 1
    assert changed.packages == digest_of(isolation.inspect(built.python)["packages"])


@pytest.mark.slow
def test_two_runs_building_one_environment_build_it_once_over_a_half_built_folder(tmp_path):
    import threading

    env = Environment("", image="img", conda_file=str(FIXTURE / "env" / "conda.yml"))
    conda = FIXTURE / "env" / "conda.yml"
    first = isolation.build(env, conda, "sha256:warm", tmp_path / "warm")
    folder = tmp_path / "envs" / Path(first.python).parent.parent.name
    folder.mkdir(parents=True)
    (folder / "left-by-a-killed-build").write_text("")  # no completion file: rebuilt
    found: list[object] = []
    threads = [threading.Thread(target=lambda: found.append(isolation.build(
        env, conda, "sha256:warm", tmp_path / "envs"))) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(found) == 2 and found[0] == found[1]
    assert not (folder / "left-by-a-killed-build").exists()
    log = (tmp_path / "envs" / f"{folder.name}.log").read_text()
    assert log.count("$ ") == 2  # one venv, one install, for both


# --- end to end ---------------------------------------------------------------------------------

@pytest.fixture
def project(tmp_path):
    (tmp_path / "mlpipe.toml").write_text("")
    return tmp_path


@pytest.mark.slow
def test_a_step_that_needs_its_own_package_runs_isolated_and_the_evidence_shows_it(project):
    assert shutil.which("termcolor") is None
    with pytest.raises(ImportError):
        __import__("termcolor")  # not in mlpipe's own environment

    plain = mlpipe(project, "submit", str(PIPELINE))
    assert plain.returncode == 1
    assert "ModuleNotFoundError: No module named 'termcolor'" in plain.stderr
    assert ("  note: 'paint' ran on mlpipe's own interpreter, not in its declared environment "
            "'inline: conda.yml' (submit --isolate builds it here from its conda file)"
            ) in plain.stderr

    isolated = mlpipe(project, "submit", str(PIPELINE), "--isolate")
    assert isolated.returncode == 0, isolated.stderr
    assert re.search(r"note: building environment 'inline: conda\.yml' \(1 requirement, "
                     r"(uv|venv and pip)\); log: ", isolated.stderr)
    (plain_id, failed, outside), (run_id, executed, inside) = step_rows(project)
    assert (failed, outside["isolated"], outside["in_declared_environment"]) == (
        "failed", False, False)
    assert outside["python"] == sys.executable
    assert (executed, inside["isolated"], inside["in_declared_environment"]) == (
        "executed", True, True)
    assert inside["note"] is None and inside["declared_environment"] == "inline: conda.yml"
    python = Path(inside["python"])
    assert python.parent.parent.parent == project / "evidence" / "environments"
    packages = isolation.inspect(str(python))["packages"]
    assert "termcolor==3.3.0" in packages and not any(p.startswith("pyyaml") for p in packages)
    assert (inside["packages_digest"], inside["packages"]) == (digest_of(packages),
                                                               len(packages))
    log = (project / "evidence" / "logs" / run_id / "paint.log").read_text()
    assert log.strip() == f"termcolor 3.3.0 on {python}"
    diff = mlpipe(project, "diff", plain_id, run_id)
    assert re.search(r"^interpreter:\n  paint: python [\d.]+, packages sha256:\w+ \(mlpipe's own, "
                     r"outside its declared environment\) -> python [\d.]+, packages "
                     r"sha256:\w+ \(isolated\)$", diff.stdout, re.M), diff.stdout

    # built once: the next isolated run finds it (and reuses the step); --no-reuse runs it
    # again in the same environment
    again = mlpipe(project, "submit", str(PIPELINE), "--isolate")
    assert again.returncode == 0 and "building environment" not in again.stderr
    assert step_rows(project)[-1][1] == "reused"
    fresh = mlpipe(project, "submit", str(PIPELINE), "--isolate", "--no-reuse")
    assert fresh.returncode == 0 and "building environment" not in fresh.stderr
    assert step_rows(project)[-1][1:] == ("executed", inside)


@pytest.mark.slow
def test_a_python_function_step_runs_isolated_on_the_mlpipe_of_this_checkout(project):
    painted = Path(__file__).resolve().parents[2] / "fixtures" / "isolated" / "painted.py"
    plain = mlpipe(project, "submit", str(painted))
    assert plain.returncode == 1
    assert "ModuleNotFoundError: No module named 'termcolor'" in plain.stderr
    assert ("note: 'paint' ran on mlpipe's own interpreter, not in its declared environment "
            "'paint-env:1' (submit --isolate builds it here from its conda file)") in plain.stderr

    done = mlpipe(project, "submit", str(painted), "--isolate")
    assert done.returncode == 0, done.stderr
    run_id, status, interp = step_rows(project)[-1]
    assert (status, interp["isolated"], interp["in_declared_environment"]) == (
        "executed", True, True)
    python = Path(interp["python"])
    assert python.parent.parent.parent == project / "evidence" / "environments"
    packages = isolation.inspect(str(python))["packages"]
    assert {"termcolor==3.3.0", f"mlpipe-aml=={version('mlpipe-aml')}"} <= set(packages)
    log = (project / "evidence" / "logs" / run_id / "paint.log").read_text()
    assert log.strip() == f"termcolor 3.3.0 on {python}"  # forked from no server of mlpipe's


@pytest.mark.slow
def test_an_environment_that_cannot_be_built_refuses_the_run_recording_nothing(project,
                                                                              tmp_path):
    job = tmp_path / "job"
    shutil.copytree(FIXTURE, job)
    (job / "env" / "conda.yml").write_text(
        "dependencies:\n  - pip\n  - pip:\n      - ./no-such-package-folder\n")
    done = mlpipe(project, "submit", str(job / "pipeline.yml"), "--isolate")
    assert done.returncode == 1, done.stderr
    assert re.search(r"^error: environment 'inline: conda\.yml' could not be built from "
                     r".*conda\.yml \(CalledProcessError\): ", done.stderr, re.M)
    assert "help: fix its requirements (whole log: " in done.stderr
    assert "Traceback" not in done.stderr
    assert not (project / "evidence" / "store.sqlite").exists()
    assert not [p for p in (project / "evidence" / "environments").iterdir() if p.is_dir()]


def test_isolate_is_for_local_runs(project):
    done = mlpipe(project, "submit", str(PIPELINE), "--isolate", "--target", "azure")
    assert done.returncode == 2
    assert done.stderr.startswith("error: --no-reuse, --max-parallel, --local-scale and "
                                  "--isolate apply to --target local only\n")


def test_the_graph_of_the_fixture_reads_its_inline_environment():
    graph = compile_pipeline(load_spec(str(PIPELINE))[0])
    comp = graph.steps["paint"].component
    assert isolation.conda_file_of(comp) == FIXTURE / "env" / "conda.yml"


def test_a_registered_environment_is_built_from_the_conda_file_its_project_declares(tmp_path):
    (tmp_path / "environments").mkdir()
    (tmp_path / "environments" / "cpu.yml").write_text(
        "name: team-cpu\nversion: 4\nimage: mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu22.04\n"
        "conda_file: cpu.conda.yml\n")
    (tmp_path / "environments" / "cpu.conda.yml").write_text(
        "dependencies: [python=3.11, pip, {pip: [mlpipe-aml==0.1.0]}]\n")
    (tmp_path / "components").mkdir()
    here = tmp_path / "components"
    declared = _component(here, Environment("team-cpu", "4"), function="components.c:fit")
    assert isolation.conda_file_of(declared) == tmp_path / "environments" / "cpu.conda.yml"
    # another version of the same name is declared nowhere: refused, saying what to add
    other = _component(here, Environment("team-cpu", "5"), function="components.c:fit")
    assert isolation.conda_file_of(other) is None
    with pytest.raises(UsageError, match=r"'team-cpu:5' is registered in the workspace and "
                                         r"declared nowhere here"):
        isolation.plan({"fit": other}, isolate=True, root=tmp_path / "built")
