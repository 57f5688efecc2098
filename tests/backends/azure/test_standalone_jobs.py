"""Standalone sweep and AutoML jobs (``type: sweep`` / ``type: automl`` at the top of a job
file): read as the same job is read in a pipeline, checked (the trial's command and launch as
any step's, the search space against the trial: MP116), compiled back to ``job.yml`` that
azure-ai-ml loads equal field by field, and refused by a local run in one line that says they
run on Azure ML."""
from __future__ import annotations

import shutil

import pytest
import yaml

from backends.azure.test_command_jobs import FIXTURE, loaded, mlpipe, variant


@pytest.fixture
def project(tmp_path):
    shutil.copytree(FIXTURE, tmp_path / "job")
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "mlpipe.toml").write_text("")
    return tmp_path


@pytest.mark.parametrize("name", ["sweep.yml", "automl.yml"])
def test_a_standalone_job_checks_and_compiles_back_to_the_same_job(project, name):
    from backends.azure.fidelity import field_differences

    job = project / "job" / name
    checked = mlpipe(project / "work", "check", str(job))
    assert checked.returncode == 0, checked.stdout
    assert "info[MP603] azure-only-step" in checked.stdout
    assert "error[" not in checked.stdout and "warning[" not in checked.stdout
    done = mlpipe(project / "work", "compile", str(job), "--out", "build")
    assert done.returncode == 0, done.stderr
    written = project / "work" / "build" / "job.yml"
    assert sorted(p.name for p in written.parent.iterdir()) == ["job.yml"]
    doc = yaml.safe_load(written.read_text())
    if name == "sweep.yml":
        assert doc["trial"]["code"] == "../../job/src"
        assert doc["inputs"]["data"]["path"] == "../../job/data"
    assert field_differences(loaded(job), loaded(written)) == []


@pytest.mark.parametrize("name, kind", [("sweep.yml", "a sweep job"),
                                        ("automl.yml", "an AutoML job")])
def test_a_local_run_refuses_a_standalone_job_in_one_line(project, name, kind):
    done = mlpipe(project / "work", "submit", str(project / "job" / name))
    assert done.returncode == 2
    step = name.removesuffix(".yml")
    assert done.stderr.splitlines()[0] == (
        f"error: 'iris_{step}' runs only on Azure ML, not here: it is {kind}")
    assert "Traceback" not in done.stderr
    assert not (project / "work" / "evidence").exists()


def test_the_trials_launch_is_checked_as_any_steps(project):
    job = variant(project, "sweep.yml", "limits:\n", "resources: {instance_count: 2}\nlimits:\n")
    checked = mlpipe(project / "work", "check", str(job))
    assert checked.returncode == 1
    assert "error[MP512] instances-without-distribution: step 'iris_sweep' asks for 2 " \
           "instances" in checked.stdout
    # help in the file's own terms, not mlpipe's decorators'
    assert "help: remove resources.instance_count, or make the code distributed and declare " \
           "distribution: {type: pytorch|tensorflow|mpi, ...}" in checked.stdout


def test_a_sampled_value_the_command_reads_must_be_in_the_search_space(project):
    job = variant(project, "sweep.yml", "--learning-rate ${{search_space.learning_rate}}",
                  "--learning-rate ${{search_space.lr}}")
    checked = mlpipe(project / "work", "check", str(job))
    assert checked.returncode == 1
    assert "error[MP116] search-space-mismatch: the trial's command reads search_space.lr, " \
           "which the search space of sweep 'iris_sweep' does not set" in checked.stdout
