"""Script components run locally: the command as Azure ML would substitute it, and an imported
pipeline.yml whose steps are tiny Python scripts, end to end through `mlpipe submit`."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mlpipe.backends.local.script import ScriptError, render_command, render_value
from mlpipe.evidence.storage import models as m
from mlpipe.evidence.storage.store import Store

SCRIPTS = Path(__file__).resolve().parents[2] / "fixtures" / "azure" / "scripts"


# --- the command ------------------------------------------------------------------------------

@pytest.mark.parametrize("command, expected", [
    ("python a.py --x ${{inputs.x}} --out ${{outputs.o}}", "python a.py --x /in/x --out /out/o"),
    ("python a.py --n ${{ inputs.n }} --flag ${{inputs.flag}}", "python a.py --n 3 --flag True"),
    ("python a.py $[[--x ${{inputs.x}}]] $[[--gone ${{inputs.gone}}]]", "python a.py --x /in/x "),
    ("python a.py $[[--rate ${{inputs.rate}} --n ${{inputs.n}}]]", "python a.py --rate 0.5 --n 3"),
    ("python a.py $[[--both ${{inputs.x}} ${{inputs.gone}}]]", "python a.py "),
])
def test_references_are_replaced_and_optional_parts_kept_or_dropped(command, expected):
    assert render_command(command, inputs={"x": "/in/x"}, outputs={"o": "/out/o"},
                          params={"n": 3, "flag": True, "rate": 0.5, "gone": None}) == expected


def test_a_required_reference_without_a_value_is_one_clear_message():
    with pytest.raises(ScriptError, match=r"^its command uses \$\{\{inputs.data\}\}, which has "
                                          r"no value \(bind it, or put that part of the command "
                                          r"in \$\[\[\.\.\.\]\]\)$"):
        render_command("python a.py --data ${{inputs.data}}", inputs={}, outputs={}, params={})
    assert render_value([1, 2]) == "[1, 2]" and render_value(False) == "False"


# --- end to end -------------------------------------------------------------------------------

@pytest.fixture
def proj(tmp_path):
    root = tmp_path / "proj"
    shutil.copytree(SCRIPTS, root)
    (root / "mlpipe.toml").write_text("")
    (root / "numbers.txt").write_text("1\n2\n4\n")
    return root


def mlpipe(root: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("MLPIPE_STORE_URL", "MLPIPE_HOME")}
    return subprocess.run([sys.executable, "-m", "mlpipe.cli", *args], cwd=root, env=env,
                          capture_output=True, text=True, timeout=120)


def submit(root: Path, *extra: str) -> tuple[subprocess.CompletedProcess, str | None]:
    result = mlpipe(root, "submit", "pipeline.yml", "--input", "numbers=numbers.txt", *extra)
    found = re.search(r"run (r-[0-9a-f]{10}) (succeeded|failed)", result.stdout + result.stderr)
    return result, found.group(1) if found else None


def facts(root: Path, run_id: str) -> dict[str, object]:
    store = Store.open(f"sqlite:///{root / 'evidence' / 'store.sqlite'}")
    try:
        with store.session() as s:
            run = s.get(m.Run, run_id)
            out = {"run": run.status}
            for sr in run.steps:
                out[sr.step] = sr.status
                for a in sr.artifacts:
                    if a.direction == "output":
                        # its key in the artifact root (i14a: artifacts by key)
                        out[f"{sr.step}.{a.port}"] = str(root / "evidence" / "artifacts" /
                                                         a.artifact.key)
            return out
    finally:
        store.close()


@pytest.mark.slow
def test_an_imported_script_pipeline_runs_records_and_reuses_like_function_steps(proj):
    first, r1 = submit(proj)
    assert first.returncode == 0, first.stderr
    got = facts(proj, r1)
    assert (got["run"], got["scale"], got["add"]) == ("succeeded", "executed", "executed")
    assert Path(got["add.total"]).read_text() == "21"  # (1 + 2 + 4) * 3
    assert (Path(got["scale.scaled"]) / "scaled.txt").read_text() == "3\n6\n12"
    log = next((proj / "evidence" / "logs" / r1).glob("scale.log")).read_text()
    assert "scaling 3 numbers by 3" in log
    assert not (proj / "src" / "scratch.txt").exists()  # the command ran in a copy

    _again, r2 = submit(proj)
    assert facts(proj, r2) | {"add.total": None, "scale.scaled": None} == {
        "run": "succeeded", "scale": "reused", "add": "reused", "add.total": None,
        "scale.scaled": None}

    # a changed parameter re-runs the step that reads it; a changed script re-runs its steps
    _, r3 = submit(proj, "--param", "scale=2")
    assert (facts(proj, r3)["scale"], Path(facts(proj, r3)["add.total"]).read_text()) == (
        "executed", "14")
    add_py = proj / "src" / "add.py"
    add_py.write_text(add_py.read_text() + "\n# changed\n")
    _, r4 = submit(proj)
    assert {k: v for k, v in facts(proj, r4).items() if "." not in k} == {
        "run": "succeeded", "scale": "executed", "add": "executed"}  # one code folder, both
    why = mlpipe(proj, "show", r4, "--why", "add").stdout
    assert re.search(r"code: sha256:[0-9a-f]{12} -> sha256:[0-9a-f]{12}", why)


@pytest.mark.slow
def test_a_failing_script_shows_its_log_tail_files_nothing_and_skips_downstream(proj):
    (proj / "numbers.txt").write_text("1\n-5\n")
    failed, rid = submit(proj)
    assert failed.returncode == 1
    assert f"error: run {rid} failed: step 'scale' failed: exit status 3" in failed.stderr
    assert "| negative number in " in failed.stderr and "whole log: " in failed.stderr
    assert facts(proj, rid) == {"run": "failed", "scale": "failed", "add": "skipped"}
    assert not (proj / "evidence" / "artifacts").exists() or not any(
        (proj / "evidence" / "artifacts").rglob("scaled.txt"))
    assert not list((proj / "evidence" / "work").glob("*/*"))


def test_code_that_is_not_a_local_folder_cannot_start(tmp_path):
    from mlpipe.backends.local.script import code_changed, stage_code
    from mlpipe.spec import ComponentSpec

    def spec(code):
        return ComponentSpec(name="x", version="1", inputs=(), outputs=(), params=(),
                             code_digest="sha256:0", command="python a.py", code=code)

    with pytest.raises(ScriptError, match=r"^its code 'azureml:my-code:1' is not a local folder"):
        stage_code(spec("azureml:my-code:1"), tmp_path / "a")
    with pytest.raises(ScriptError, match=r"^its code folder /nowhere/src does not exist$"):
        stage_code(spec("/nowhere/src"), tmp_path / "b")
    assert stage_code(spec(None), tmp_path / "c").is_dir()
    assert code_changed(spec(None))  # the digest it was "loaded" with is not the command's


def test_a_code_folder_that_holds_the_runs_work_folder_is_one_clear_message(tmp_path):
    """``code=.`` at a project's root: the step's copy would be made inside the folder it
    copies (with the evidence store), a copy that never ends; refused before copying."""
    from mlpipe.backends.local.script import stage_code
    from mlpipe.spec import ComponentSpec

    (tmp_path / "run.py").write_text("print('hi')\n")
    spec = ComponentSpec(name="x", version="1", inputs=(), outputs=(), params=(),
                         code_digest="sha256:0", command="python run.py", code=str(tmp_path))
    dest = tmp_path / "evidence" / "work" / "r-1" / "x" / "code"
    with pytest.raises(ScriptError, match=(
            rf"^its code folder {re.escape(str(tmp_path))} holds the folder its run works in "
            rf"\({re.escape(str(dest.parent.parent))}\): mlpipe cannot copy the folder into "
            r"itself; point code: at the folder of its scripts \(a src/ folder\), not at the "
            r"project$")):
        stage_code(spec, dest)
    assert not (tmp_path / "evidence").exists()


@pytest.mark.slow
def test_a_distributed_script_step_runs_each_rank_in_the_code_copy(tmp_path):
    root = tmp_path / "dist"
    (root / "src").mkdir(parents=True)
    (root / "mlpipe.toml").write_text("")
    (root / "numbers.txt").write_text("1\n")
    (root / "src" / "rank.py").write_text(
        "import os, sys\nprint('rank', os.environ['RANK'], 'of', os.environ['WORLD_SIZE'],"
        " 'in', os.getcwd(), 'reads', sys.argv[2])\n")
    (root / "pipeline.yml").write_text(
        "type: pipeline\ndisplay_name: ranks\ninputs:\n  numbers: {type: uri_file}\njobs:\n"
        "  fan:\n    type: command\n    command: python rank.py --numbers ${{inputs.numbers}}\n"
        "    code: ./src\n    environment: azureml:script-env:1\n"
        "    distribution: {type: pytorch, process_count_per_instance: 2}\n"
        "    inputs:\n      numbers: ${{parent.inputs.numbers}}\n")
    result, rid = submit(root)
    assert result.returncode == 0, result.stderr
    log = (root / "evidence" / "logs" / rid / "fan.log").read_text()
    for rank in (0, 1):
        assert re.search(rf"rank {rank} of 2 in .*/evidence/work/{rid}/fan/code reads /", log)
