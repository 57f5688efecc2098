"""The exported command form of the step entry point runs the component body for real."""
import json
import os
import shlex
import subprocess
import sys

from components.defect import prepare
from components.synthetic import make_dataset
from mlpipe.backends.azure.command import runtime_command

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _filled(tmp_path, digest: str | None = None) -> list[str]:
    raw, split = make_dataset(tmp_path / "data", per_class=20, seed=1)
    command = runtime_command(prepare.spec)
    if digest:
        command = command.replace(prepare.spec.digest, digest)
    values = {"inputs.raw": raw, "inputs.split": split, "outputs.examples": tmp_path / "examples",
              "outputs.labels": tmp_path / "labels.json", "inputs.seed": 7,
              "outputs.mlpipe_record": tmp_path / "record"}
    for key, value in values.items():
        command = command.replace("${{" + key + "}}", str(value))
    return [sys.executable, *shlex.split(command)[1:]]


def test_exported_command_line_runs_the_body(tmp_path):
    done = subprocess.run(_filled(tmp_path), cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert (tmp_path / "labels.json").is_file()
    assert {p.name for p in (tmp_path / "examples").iterdir()} == {"train", "val", "test"}
    assert json.loads((tmp_path / "record" / "step.json").read_text())["status"] == "succeeded"


def test_code_that_changed_since_compile_is_warned(tmp_path):
    done = subprocess.run(_filled(tmp_path, "sha256:" + "0" * 64), cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert (f"mlpipe: warning: component components.defect:prepare has digest "
            f"{prepare.spec.digest} here but was compiled as sha256:{'0' * 64}") in done.stderr


def test_bad_arguments_exit_2_with_one_message():
    argv = [sys.executable, "-m", "mlpipe.runtime.step", "--component",
            "components.defect:prepare", "--param", "seed"]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stderr.startswith("error: mlpipe.runtime.step arguments: --param 'seed' is not "
                                  "NAME=VALUE")
    assert "Traceback" not in done.stderr
