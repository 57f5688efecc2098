"""Single command jobs as Azure ML's CLI reads them, whatever the spelling of their type (none
— the CLI's default, ``command`` —, ``command``; ``Command`` is MP115): one path in, one path
out. ``compile`` writes ``job.yml`` with every relative path rebased (``code``, the conda file,
a build context, data paths), which azure-ai-ml loads back equal field by field; a refused
compile prints azure-ai-ml's whole reason and leaves nothing written; a local run gets the
``./outputs`` folder Azure ML gives every job."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from mlpipe.backends.azure.reasons import refusal_reason

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "azure" / "command_job"


def mlpipe(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("MLPIPE_STORE_URL", "MLPIPE_HOME")}
    return subprocess.run([sys.executable, "-m", "mlpipe.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture
def project(tmp_path):
    """A copy of the job's folder (as a team has it) and a project folder beside it."""
    shutil.copytree(FIXTURE, tmp_path / "job")
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "mlpipe.toml").write_text("")
    return tmp_path


def variant(project: Path, name: str, old: str, new: str) -> Path:
    text = (project / "job" / name).read_text()
    assert old in text
    path = project / "job" / f"variant-{name}"
    path.write_text(text.replace(old, new))
    return path


def loaded(path: Path):
    from mlpipe.backends.azure.validate import quiet_azure_ai_ml

    quiet_azure_ai_ml()
    from azure.ai.ml import load_job

    return load_job(path)


@pytest.mark.parametrize("spelling", ["", "type: command\n"])
def test_a_command_job_compiles_to_job_yml_with_every_path_rebased(project, spelling):
    from backends.azure.fidelity import field_differences

    job = variant(project, "job.yml", "code: src\n", f"{spelling}code: src\n")
    checked = mlpipe(project / "work", "check", str(job))
    assert checked.returncode == 0 and "No problems found" in checked.stdout, checked.stdout
    done = mlpipe(project / "work", "compile", str(job), "--out", "build")
    assert done.returncode == 0, done.stderr
    build = project / "work" / "build"
    assert sorted(p.name for p in build.iterdir()) == ["job.yml"]
    assert f"wrote build{os.sep}job.yml (validated by azure-ai-ml)" in done.stdout
    doc = yaml.safe_load((build / "job.yml").read_text())
    assert doc["code"] == "../../job/src"
    assert doc["environment"]["conda_file"] == "../../job/environment/conda.yml"
    assert doc["inputs"]["data"]["path"] == "../../job/data"
    assert ("type" in doc) == bool(spelling)  # written as it was read
    assert field_differences(loaded(job), loaded(build / "job.yml")) == []


def test_an_inline_build_context_is_rebased_and_not_called_unversioned(project):
    from backends.azure.fidelity import field_differences

    job = project / "job" / "job_build.yml"
    checked = mlpipe(project / "work", "check", str(job))
    assert checked.returncode == 0 and "MP801" not in checked.stdout, checked.stdout
    done = mlpipe(project / "work", "compile", str(job), "--out", "build")
    assert done.returncode == 0, done.stderr
    doc = yaml.safe_load((project / "work" / "build" / "job.yml").read_text())
    assert doc["environment"] == {"build": {"path": "../../job/docker"}}
    assert field_differences(loaded(job), loaded(project / "work" / "build" / "job.yml")) == []


def test_a_type_azure_ai_ml_would_refuse_is_reported_and_not_compiled(project):
    job = variant(project, "job.yml", "code: src\n", "type: Command\ncode: src\n")
    done = mlpipe(project / "work", "compile", str(job), "--out", "build")
    assert done.returncode == 1 and "error[MP115] job-type-misspelled" in done.stderr
    assert not (project / "work" / "build").exists()


def test_a_refused_compile_prints_azure_ai_mls_reason_and_leaves_nothing(project):
    job = variant(project, "job.yml", "compute: azureml:cpu-cluster\n",
                  "compute: azureml:cpu-cluster\nlimits: {timeout: soon}\n")
    done = mlpipe(project / "work", "compile", str(job), "--out", "build")
    assert done.returncode == 2, done.stderr
    assert "azure-ai-ml cannot load build/job.yml: limits.timeout: Not a valid integer." in \
        done.stderr
    assert f"help: azure-ai-ml refuses what {job} says; fix it there (nothing was written)" in \
        done.stderr
    assert "Traceback" not in done.stderr
    assert sorted(p.name for p in (project / "work").iterdir()) == ["mlpipe.toml"]
    # into a folder that holds other files: they stay, nothing is added
    (project / "work" / "build").mkdir()
    (project / "work" / "build" / "keep.txt").write_text("mine")
    again = mlpipe(project / "work", "compile", str(job), "--out", "build")
    assert again.returncode == 2
    assert sorted(p.name for p in (project / "work" / "build").iterdir()) == ["keep.txt"]
    assert sorted(p.name for p in (project / "work").iterdir()) == ["build", "mlpipe.toml"]


def test_a_missing_code_folder_is_an_error_at_check_time(project):
    job = variant(project, "job.yml", "code: src\n", "code: ./trainer\n")
    checked = mlpipe(project / "work", "check", str(job))
    assert checked.returncode == 1
    assert "error[MP114] code-folder-missing: step 'variant_job' runs code from " in \
        checked.stdout


def test_a_local_run_of_a_command_job_has_an_outputs_folder(project):
    done = mlpipe(project / "work", "submit", str(project / "job" / "job.yml"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "succeeded" in done.stdout


def test_the_reason_is_every_field_and_message_of_azure_ai_mls_report():
    text = ('Validation for CommandSchema failed:\n\n {\n  "result": "Failed",\n  "errors": [\n'
            '    {\n      "message": "Validation for CommandJobSchema failed:\\n\\n {\\n  '
            '\\"limits\\": {\\n    \\"timeout\\": [\\n      \\"Not a valid integer.\\"\\n    ]'
            '\\n  },\\n  \\"distribution\\": {\\"type\\": [\\"Must be one of: pytorch.\\", '
            '\\"Must be one of: mpi.\\"]}\\n} \\n\\n If you are trying to configure a job that '
            'is not of type command, please specify the correct job type.",\n      "path": '
            '"*",\n      "value": null\n    }\n  ]\n} \n\n Visit this link to refer to the '
            'schema.')
    assert refusal_reason(ValueError(text)) == (
        "limits.timeout: Not a valid integer.; distribution.type: Must be one of: pytorch. / "
        "Must be one of: mpi.")
    assert refusal_reason(ValueError("Unsupported job type: Command.")) == \
        "Unsupported job type: Command."
    assert refusal_reason(ValueError("")) == "ValueError"
