"""The differential rehearsal on real gloo ranks (``mlpipe rehearse``): a coordinated DDP
trainer shows no difference between world size 1 and its topology, and each coordination
mistake of ``tests/fixtures/distributed/rehearsal_steps.py`` is reported with its code and the
rank facts behind it. Bad input is one message and exit 2."""
import json
import os
import pathlib

import pytest
from click.testing import CliRunner

from fixtures.distributed.rehearsal_steps import train
from mlpipe.backends.local.rehearsal import rehearse
from mlpipe.cli import main
from mlpipe.judgements.rehearsal import judge

ROOT = pathlib.Path(__file__).resolve().parents[3]
SYS_PATH = [str(ROOT), str(ROOT / "tests")]


def _rehearse(tmp_path, mistake, scale=(1, 2)):
    one, many = rehearse(train.spec, inputs={}, params={"mistake": mistake},
                         work=tmp_path / "work", cwd=str(ROOT), sys_path=SYS_PATH, scale=scale,
                         timeout=300)
    return one, many, judge(one.facts(), many.facts(), step="train")


@pytest.mark.slow
@pytest.mark.parametrize("mistake, scale, codes, fragment", [
    ("none", (1, 2), [], None),
    ("whole-data", (1, 2), ["MP560"], "each rank trained on the whole data set; every rank "
                                      "consumed all 256 ids of the data set"),
    ("batch-not-divided", (1, 2), ["MP561"], "each optimiser step takes 64 examples (32 + 32"),
    ("loss-summed", (1, 2), ["MP563"], "2 times it: a sum over the ranks logged as the global"),
    ("rank-seed", (1, 2), ["MP564"], "trained a model no DistributedDataParallel wraps"),
    ("grad-summed", (2, 2), ["MP562"], "at world size 4 (the ranks' mean)"),
])
def test_the_rehearsal_tells_coordinated_training_from_each_mistake(tmp_path, mistake, scale,
                                                                     codes, fragment):
    pytest.importorskip("torch")
    one, many, found = _rehearse(tmp_path, mistake, scale)
    assert (one.failure, many.failure) == (None, None)
    assert (one.world_size, many.world_size) == (1, scale[0] * scale[1])
    assert [d.code for d in found.diagnostics] == codes, [d.render() for d in found.diagnostics]
    assert found.unseen == []
    if fragment is not None:
        assert fragment in found.diagnostics[0].message
    compared = {row["fact"]: row["same"] for row in found.compared}
    assert compared["trained parameters equal across ranks"] is (mistake != "rank-seed")
    if mistake == "whole-data":
        facts = found.findings[0][1]
        # the step record's own facts explain it: each rank consumed the whole population,
        # and the launcher's coordination check saw independent copies
        assert {r["consumed"] for r in facts["ranks"].values()} == {256}
        assert "MP522" in {d["code"] for d in facts["coordination"]}


@pytest.mark.slow
def test_a_rank_that_fails_is_reported_with_the_size_it_failed_at(tmp_path):
    pytest.importorskip("torch")
    _, _, found = _rehearse(tmp_path, "no-such-mistake")
    assert [d.code for d in found.diagnostics] == ["MP565", "MP565"]
    assert found.diagnostics[0].message.startswith(
        "the step failed at world size 1 (fails at both sizes): ")


def _cli(*args):
    old = os.getcwd()
    os.chdir(ROOT)
    try:
        return CliRunner().invoke(main, ["rehearse", *args], catch_exceptions=False)
    finally:
        os.chdir(old)


@pytest.mark.parametrize("args, message", [
    (["--step", "nope"], "error: pipeline 'defect-classifier-ddp' has no step 'nope'"),
    (["--step", "prepare"], "error: component 'prepare' is not distributed: there is no "
                            "topology to rehearse against world size 1"),
    (["--step", "train_cnn", "--scale", "2by2"],
     "error: --local-scale train_cnn=2by2 is not NODESxPROCESSES or fit"),
    (["--step", "train_cnn", "--scale", "0x2"], "error: --scale 0x2 is not a positive size"),
    (["--step", "train_cnn", "--param", "epochs=many"],
     "error: parameter 'epochs' was given 'many', which is not a int"),
    (["--step", "train_cnn", "--param", "lr=1"], "error: step 'train_cnn' has no parameter 'lr'"),
    (["--step", "train_cnn", "--input", "examples=/no/such/folder"],
     "error: --input examples=/no/such/folder: no such file or folder"),
    (["--step", "train_cnn"], "error: input 'examples' of 'train_cnn' is not given"),
])
def test_bad_input_is_one_message_and_exit_2(args, message):
    result = _cli("pipelines/defect_classifier_ddp.py", *args)
    assert result.exit_code == 2, result.output
    assert result.output.startswith(message), result.output
    assert "Traceback" not in result.output


@pytest.mark.slow
def test_the_command_prints_json_and_exits_1_on_a_difference(tmp_path):
    pytest.importorskip("torch")
    result = _cli("tests/fixtures/distributed/rehearsal_steps.py", "--step", "rehearsed_train",
                  "--param", "mistake=rank-seed", "--work", str(tmp_path), "--format", "json")
    assert result.exit_code == 1, result.output
    document = json.loads(result.output)
    assert [d["code"] for d in document["diagnostics"]] == ["MP564"]
    assert set(document["seconds"]) == {"world_size_1", "world_size_2"}
