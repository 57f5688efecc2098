"""The step record: what the runtime leaves per rank and per step, wherever the step runs, and
what it observes of the body's file access."""
import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from mlpipe.digests.snapshot import snapshot
from mlpipe.runtime import record

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "runtime"


def _run(tmp_path, function, *, inputs=None, outputs=None, env=None, record_dir="record"):
    argv = [sys.executable, "-m", "mlpipe.runtime.step", "--component", function]
    for flag, values in (("--input", inputs or {}), ("--output", outputs or {})):
        for name, path in values.items():
            argv += [flag, f"{name}={path}"]
    if record_dir is not None:
        argv += ["--record", str(tmp_path / record_dir)]
    environment = {k: v for k, v in os.environ.items() if not k.startswith("MLPIPE_")}
    environment.update(PYTHONPATH=os.pathsep.join([str(FIXTURES), str(ROOT)]), **(env or {}))
    return subprocess.run(argv, cwd=tmp_path, env=environment, capture_output=True, text=True,
                          timeout=120)


def _valid(found):
    jsonschema.Draft202012Validator(record.schema()).validate(found)
    jsonschema.Draft202012Validator(record.schema()).validate(record.stored(found))
    return found


def test_a_step_records_its_outputs_digests_writes_and_hidden_reads(tmp_path):
    (tmp_path / "data.txt").write_text("data")
    (tmp_path / "hidden.txt").write_text("hidden")
    out = tmp_path / "out"
    out.mkdir()
    done = _run(tmp_path, "record_steps:hidden_reader", inputs={"data": tmp_path / "data.txt"},
                outputs={"out": out}, env={"HIDDEN_PATH": str(tmp_path / "hidden.txt")})
    assert done.returncode == 0, done.stderr
    found = _valid(record.load_record(tmp_path / "record"))
    [part] = found["ranks"]
    assert part["reads_outside_inputs"] == [str(tmp_path / "hidden.txt")]
    assert part["writes"] == {"out": ["a.txt", "b.txt"]}
    assert part["writes_elsewhere"] == []
    assert part["status"] == "succeeded" and part["failure"] is None
    step = found["step"]
    assert step["status"] == "succeeded" and step["world_size"] == 1
    entry = step["outputs"]["out"]
    assert entry["digest"] == snapshot(out).digest            # the local store's digest
    assert [f["name"] for f in entry["files"]] == ["a.txt", "b.txt"]
    assert entry["files"][1]["sha256"] == ("3e23e8160039594a33894f6564e1b1348bbd7a0088d42c4acb7"
                                           "3eeaed59c009d")  # sha256 of "b"
    assert step["writes"]["out"] == [{"name": "a.txt", "ranks": [0], "how": "observed"},
                                     {"name": "b.txt", "ranks": [0], "how": "observed"}]


def test_native_writes_are_attributed_by_the_finisher(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    done = _run(tmp_path, "record_steps:native_writer", outputs={"out": out})
    assert done.returncode == 0, done.stderr
    found = _valid(record.load_record(tmp_path / "record"))
    assert found["ranks"][0]["writes"] == {"out": ["python.txt"]}   # the hook saw this one
    assert found["step"]["writes"]["out"] == [
        {"name": "native.txt", "ranks": [0], "how": "only-process"},
        {"name": "python.txt", "ranks": [0], "how": "observed"}]


def test_what_a_forked_worker_reads_is_the_ranks(tmp_path):
    (tmp_path / "data.txt").write_text("data")
    (tmp_path / "hidden.txt").write_text("hidden")
    done = _run(tmp_path, "record_steps:forking_reader", inputs={"data": tmp_path / "data.txt"},
                outputs={"out": tmp_path / "out.txt"},
                env={"HIDDEN_PATH": str(tmp_path / "hidden.txt")})
    assert done.returncode == 0, done.stderr
    found = _valid(record.load_record(tmp_path / "record"))
    [part] = found["ranks"]
    assert part["reads_outside_inputs"] == [str(tmp_path / "hidden.txt")]
    assert len(part["children"]) == 1


def test_the_files_opened_under_each_input_are_recorded_and_stored_together(tmp_path):
    data = tmp_path / "data"
    for name in ("train/a.txt", "train/b.txt", "test/c.txt"):
        (data / name).parent.mkdir(parents=True, exist_ok=True)
        (data / name).write_text(name)
    done = _run(tmp_path, "record_steps:part_reader", inputs={"data": data},
                outputs={"out": tmp_path / "out.txt"})
    assert done.returncode == 0, done.stderr
    found = _valid(record.load_record(tmp_path / "record"))
    # the forked worker's open is the rank's; listing test/ opens none of its files
    assert found["ranks"][0]["reads_inputs"] == {"data": ["train/a.txt", "train/b.txt"]}
    opened = record.stored(found)["step"]["opened_inputs"]
    assert opened["data"]["count"] == 2 and opened["data"]["files"] == ["train/a.txt",
                                                                         "train/b.txt"]
    assert opened["data"]["digest"].startswith("sha256:")


def test_observation_off_is_unknown_not_empty(tmp_path):
    (tmp_path / "data.txt").write_text("data")
    (tmp_path / "hidden.txt").write_text("hidden")
    (tmp_path / "out").mkdir()
    done = _run(tmp_path, "record_steps:hidden_reader", inputs={"data": tmp_path / "data.txt"},
                outputs={"out": tmp_path / "out"},
                env={"HIDDEN_PATH": str(tmp_path / "hidden.txt"), "MLPIPE_OBSERVE": "0"})
    assert done.returncode == 0, done.stderr
    found = _valid(record.load_record(tmp_path / "record"))
    [part] = found["ranks"]
    assert part["reads_outside_inputs"] is None and part["writes"] is None
    assert part["reads_inputs"] is None
    assert record.stored(found)["step"]["opened_inputs"] is None
    assert part["observation"] == {"enabled": False,
                                   "why_not": "switched off (MLPIPE_OBSERVE=0)"}


@pytest.mark.parametrize("split, code, message", [
    ("test", 0, None),
    ("train", 1, "output 'report' does not match its contract: metric 'accuracy' was computed "
                 "on split 'train' but metrics-report:fixture-report requires split 'test'"),
])
def test_output_contracts_are_checked_by_the_runtime(tmp_path, split, code, message):
    labels = tmp_path / "labels.json"
    labels.write_text(json.dumps({"ok": 0, "dent": 1}))
    done = _run(tmp_path, "record_steps:report_on", inputs={"labels": labels},
                outputs={"report": tmp_path / "report.json"}, env={"REPORT_SPLIT": split})
    assert done.returncode == code, done.stderr
    step = _valid(record.load_record(tmp_path / "record"))["step"]
    if message is None:
        assert step["failure"] is None and step["outputs"]["report"]["valid"] is True
        assert done.stderr == ""
        return
    assert done.stderr == f"mlpipe: {message}\n"
    assert step["failure"] == {"layer": "output-contract", "type": None, "message": message,
                               "port": "report", "rank": 0, "mismatch": "population"}
    assert step["outputs"]["report"]["valid"] is False


def test_input_contracts_are_checked_before_the_body(tmp_path):
    labels = tmp_path / "labels.json"
    labels.write_text(json.dumps({"ok": 0, "dent": 2}))
    done = _run(tmp_path, "record_steps:report_on", inputs={"labels": labels},
                outputs={"report": tmp_path / "report.json"})
    assert done.returncode == 1
    assert done.stderr.startswith("mlpipe: input 'labels' does not match its contract: ")
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "report.json").exists()        # the body never ran
    found = _valid(record.load_record(tmp_path / "record"))
    assert found["step"]["failure"]["layer"] == "input-contract"
    assert found["step"]["inputs"]["labels"]["valid"] is False
    assert found["ranks"][0]["observation"]["enabled"] is False


def test_without_a_record_folder_outputs_are_still_checked(tmp_path):
    labels = tmp_path / "labels.json"
    labels.write_text(json.dumps({"ok": 0, "dent": 1}))
    done = _run(tmp_path, "record_steps:report_on", inputs={"labels": labels},
                outputs={"report": tmp_path / "report.json"}, env={"REPORT_SPLIT": "val"},
                record_dir=None)
    assert done.returncode == 1
    assert "output 'report' does not match its contract" in done.stderr
    assert not (tmp_path / "record").exists()
