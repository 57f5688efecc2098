"""What a compiled job uploads as its function components' code: only the modules the steps
import (the ``.amlignore`` mlpipe writes at the code root, read by azure-ai-ml's own upload
walk), a warning on a large file left in it (MP850), and the modes of the written files."""
from __future__ import annotations

import os
import pathlib
import stat
import subprocess
import sys
import textwrap

import pytest

from mlpipe.backends.azure import upload
from mlpipe.backends.azure.export import export_pipeline
from mlpipe.backends.azure.export_checks import export_checks
from mlpipe.loader import load_spec

ROOT = pathlib.Path(__file__).resolve().parents[3]
EXAMPLE_INPUTS = {"raw": "azureml:raw:1", "split": "azureml:split:1"}


def azure_ml_upload(root: pathlib.Path) -> list[str]:
    """The files azure-ai-ml uploads for a component whose ``code`` is ``root``."""
    from azure.ai.ml._utils._asset_utils import get_ignore_file, get_upload_files_from_folder

    found = get_upload_files_from_folder(root, ignore_file=get_ignore_file(root))
    return sorted(remote for _, remote in found)


def fresh_example_amlignore():
    """The checkout's .amlignore is generated (and git-ignored): start from none."""
    path = ROOT / ".amlignore"
    if path.is_file() and path.read_text().startswith(upload.MARK):
        path.unlink()


def test_the_example_uploads_only_the_modules_its_steps_import(tmp_path):
    fresh_example_amlignore()
    spec, _ = load_spec(str(ROOT / "pipelines" / "defect_classifier.py"))
    export = export_pipeline(spec, out_dir=tmp_path, inputs=EXAMPLE_INPUTS)
    export.write(tmp_path)
    assert [u.root for u in export.uploads] == [ROOT]
    expected = ["components/__init__.py", "components/defect.py", "components/defect_ddp.py",
                "components/images.py", "components/serving/__init__.py",
                "components/serving/defect_cnn.py", "components/serving/defect_softmax.py",
                "components/synthetic.py"]
    assert export.uploads[0].files() == expected
    assert azure_ml_upload(ROOT) == expected
    text = (ROOT / ".amlignore").read_text()
    assert text.startswith(upload.MARK) and "/evidence/" in text and ".venv/" in text


def test_the_distributed_example_uploads_its_module_and_what_it_imports(tmp_path):
    fresh_example_amlignore()
    spec, _ = load_spec(str(ROOT / "pipelines" / "defect_classifier_ddp.py"))
    export = export_pipeline(spec, out_dir=tmp_path, inputs=EXAMPLE_INPUTS)
    assert [u.tops() for u in export.uploads] == [["components/"]]


def test_a_second_pipeline_from_one_root_keeps_what_the_first_one_uploads(tmp_path):
    """Both job folders stay submittable with `az ml job create`: the .amlignore of the code
    root they share lets in the packages of both (while they exist)."""
    for rel in ("kit/steps.py", "other/__init__.py", "solo.py"):
        (tmp_path / rel).parent.mkdir(exist_ok=True)
        (tmp_path / rel).write_text("")
    upload.plan(tmp_path, [tmp_path / "other" / "__init__.py", tmp_path / "solo.py"]).write()
    second = upload.plan(tmp_path, [tmp_path / "kit" / "steps.py"])
    assert second.tops() == ["kit/", "other/", "solo.py"]
    second.write()
    assert azure_ml_upload(tmp_path) == ["kit/steps.py", "other/__init__.py", "solo.py"]
    (tmp_path / "solo.py").unlink()
    assert upload.plan(tmp_path, [tmp_path / "kit" / "steps.py"]).tops() == ["kit/", "other/"]


PROJECT = {
    "kit/__init__.py": "",
    "kit/helpers.py": "def twice(x):\n    return 2 * x\n",
    "kit/unused.py": "raise SystemExit('never imported')\n",
    "kit/lookup.json": '{"a": 1}\n',
    "kit/sub/__init__.py": "",
    "kit/sub/table.py": "ROWS = 3\n",
    "kit/steps.py": textwrap.dedent('''\
        from pathlib import Path

        from kit.helpers import twice
        from mlpipe import Compute, Environment, Input, Output, component


        @component(version="1", environment=Environment("env", version="1"),
                   compute=Compute("cpu-cluster"))
        def double(raw: Input["uri_folder"], out: Output["uri_folder"]):
            from kit.sub import table
            (Path(out) / "n").write_text(str(twice(table.ROWS)))
        '''),
    "flow.py": textwrap.dedent('''\
        from kit.steps import double

        from mlpipe import pipeline


        @pipeline(name="kit-flow")
        def flow(raw):
            return {"out": double(raw=raw).out}
        '''),
    "notes/big.csv": "x\n" * 10,
    "evidence/store.sqlite": "not a database",
    "evidence/artifacts/blake3/aa/data": "an artifact",
    ".venv/pyvenv.cfg": "home = /usr/bin\n",
    ".venv/lib/site.py": "",
    "kit/.venv/pyvenv.cfg": "home = /usr/bin\n",
    "kit/env2/pyvenv.cfg": "home = /usr/bin\n",
    "kit/env2/lib/x.txt": "in a virtual environment",
    "kit/__pycache__/helpers.cpython-312.pyc": "",
}


def make_project(root: pathlib.Path, big: int = 0) -> pathlib.Path:
    for rel, text in PROJECT.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    if big:
        with open(root / "kit" / "weights.bin", "wb") as fh:
            fh.truncate(big)
    return root


def compile_in(root: pathlib.Path, umask: int = 0o022) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("MLPIPE_HOME",)}
    env["PYTHONPATH"] = os.pathsep.join([str(root), env.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, "-c", f"import os, sys; os.umask({umask}); from mlpipe.cli import main; "
                               f"sys.argv[0] = 'mlpipe'; main()",
         "compile", "flow.py:flow", "-o", "build", "--input", "raw=azureml:raw:1",
         "--no-validate"], cwd=root, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_a_project_uploads_its_imports_and_package_data_never_the_store_or_environments(
        tmp_path):
    root = make_project(tmp_path)
    done = compile_in(root)
    assert done.returncode == 0, done.stderr
    expected = ["kit/__init__.py", "kit/helpers.py", "kit/lookup.json", "kit/steps.py",
                "kit/sub/__init__.py", "kit/sub/table.py", "kit/unused.py"]
    assert azure_ml_upload(root) == expected
    text = (root / ".amlignore").read_text()
    assert "/evidence/" in text and "/kit/env2/" in text and "MP850" not in done.stderr
    # the job's code is the project, and every written file follows the umask (0644 here)
    component = (root / "build" / "components" / "double.yml").read_text()
    assert "code: ../.." in component
    for path in (root / "build").rglob("*.yml"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o644, path
    assert stat.S_IMODE((root / ".amlignore").stat().st_mode) == 0o644


@pytest.mark.slow
def test_written_files_follow_a_stricter_umask(tmp_path):
    root = make_project(tmp_path)
    assert compile_in(root, umask=0o027).returncode == 0
    for path in [*(root / "build").rglob("*.yml"), root / ".amlignore"]:
        assert stat.S_IMODE(path.stat().st_mode) == 0o640, path


@pytest.fixture
def project_modules():
    """The project's modules (``kit``, ``flow``) imported in this process by neither an earlier
    test nor this one afterwards: a ``kit`` left in ``sys.modules`` from another test's folder
    would be the package found for this folder's imports."""
    def forget() -> None:
        for name in list(sys.modules):
            if name == "kit" or name.startswith("kit.") or name == "flow":
                del sys.modules[name]

    forget()
    yield
    forget()


def test_a_large_file_left_in_a_package_is_named_and_a_small_one_is_not(tmp_path, monkeypatch,
                                                                         project_modules):
    root = make_project(tmp_path, big=upload.LARGE_FILE_BYTES + 1)
    monkeypatch.syspath_prepend(str(root))
    spec, _ = load_spec(str(root / "flow.py") + ":flow")
    found = [d for d in export_checks(spec, inputs={"raw": "azureml:raw:1"})
             if d.code == "MP850"]
    assert [(d.severity.value, d.message) for d in found] == [(
        "warning", f"the code upload of {root} holds 1 file(s) of 10 MiB or more beside the "
                   f"modules the steps import: kit/weights.bin (10 MiB); Azure ML uploads them "
                   f"with every changed submission")]
    assert found[0].hint.startswith("move data out of the components' packages")
    (root / "kit" / "weights.bin").unlink()
    (root / "kit" / "weights.bin").write_bytes(b"0" * (upload.LARGE_FILE_BYTES - 1))
    assert [d for d in export_checks(spec, inputs={"raw": "azureml:raw:1"})
            if d.code == "MP850"] == []


def test_a_users_own_amlignore_is_kept_and_said_so(tmp_path, monkeypatch, project_modules):
    root = make_project(tmp_path)
    (root / ".amlignore").write_text("evidence/\n")
    monkeypatch.syspath_prepend(str(root))
    spec, _ = load_spec(str(root / "flow.py") + ":flow")
    export = export_pipeline(spec, out_dir=root / "build", inputs={"raw": "azureml:raw:1"})
    export.write(root / "build")
    assert (root / ".amlignore").read_text() == "evidence/\n"
    assert any(n.endswith("is your own: Azure ML uploads " + str(root) + " as it says "
                          "(mlpipe wrote none)") for n in export.notes), export.notes
