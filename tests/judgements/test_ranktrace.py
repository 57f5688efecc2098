"""The rank-level trace's judgements on records (judgements/ranktrace.py): a triggering record and
a near-identical clean one per finding, and records cut short judged without raising. The same
findings from real gloo ranks are in tests/runtime/test_ranktrace.py."""
from __future__ import annotations

import pytest

from mlpipe.judgements.coordination import check_coordination
from mlpipe.judgements.ranktrace import judge


def _trace(**fields):
    base = {"enabled": True, "method": "monkeypatch", "devices": [], "collectives": [],
            "samplers": [], "calls": [], "waiting": None, "failed_in": None, "hang": None,
            "cuda_visible_devices": None, "entries_lost": 0}
    return {**base, **fields}


def _part(rank, status="succeeded", node=0, **trace):
    return {"rank": rank, "world_size": 2, "local_rank": rank, "node_rank": node,
            "role": "worker", "status": status, "trace": _trace(**trace)}


def _codes(parts, world=2):
    return sorted(d.code for d in judge({p["rank"]: p for p in parts}, world, {"step": "s"}))


def _calls(op, n, site="/w/train.py:9"):
    return [{"op": op, "site": site, "count": n}] if n else []


@pytest.mark.parametrize(("counts", "statuses", "codes"), [
    ((1, 0), ("failed", "succeeded"), ["MP540"]),    # rank 1 finished without the barrier
    ((1, 1), ("succeeded", "succeeded"), []),        # both called it
    ((1, 0), ("running", "succeeded"), []),          # rank 0 has not stopped: not judged
    ((2, 1), ("succeeded", "failed"), []),           # rank 1 crashed outside a collective
])
def test_a_collective_called_a_different_number_of_times(counts, statuses, codes):
    parts = [_part(r, s, collectives=_calls("barrier", n),
                   failed_in={"op": "barrier", "site": "/w/train.py:9", "error": "closed"}
                   if s == "failed" and r == 0 else None)
             for r, (n, s) in enumerate(zip(counts, statuses))]
    assert _codes(parts) == codes


def test_the_mismatch_names_the_counts_and_the_call_site():
    parts = [_part(0, "failed", collectives=_calls("barrier", 1),
                   failed_in={"op": "barrier", "site": "/w/train.py:9", "error": "x"}),
             _part(1)]
    [found] = judge({p["rank"]: p for p in parts}, 2, {"step": "train"})
    assert found.message == ("collective 'barrier' was called a different number of times by "
                             "the ranks (rank 0: 1, rank 1: 0; called at train.py:9): a rank "
                             "waits in a collective its peers never enter")
    assert (found.file, found.line, found.step) == ("/w/train.py", 9, "train")


def _device(device, via="Module.to"):
    return [{"requested": device, "device": device, "via": via, "site": "/w/t.py:3",
             "resolved": "cpu", "count": 1}]


@pytest.mark.parametrize(("devices", "nodes", "visible", "codes"), [
    (("cuda:0", "cuda:0"), (0, 0), None, ["MP541"]),           # one GPU, two ranks
    (("cuda:0", "cuda:1"), (0, 0), None, []),                  # each its own
    (("cuda:0", "cuda:0"), (0, 1), None, []),                  # one per node
    (("cuda:0", "cuda:0"), (0, 0), ("0", "1"), []),            # visible devices renumber
])
def test_two_ranks_of_a_node_on_one_gpu(devices, nodes, visible, codes):
    parts = [_part(r, node=nodes[r], devices=_device(devices[r]),
                   cuda_visible_devices=visible[r] if visible else None) for r in range(2)]
    assert _codes(parts) == codes


def _hang(why="waited past the limit"):
    return {"op": "barrier", "site": "/w/t.py:5", "waited_s": 61.0, "limit_s": 60.0,
            "why": why, "at": "2026-01-01T00:00:00+00:00",
            "stack": ["/w/t.py:5 in train"]}


def test_a_hang_names_every_ranks_place():
    parts = [_part(0, "running", hang=_hang(), collectives=_calls("barrier", 1)),
             _part(1, "running", hang={**_hang("another rank hung"), "op": None, "site": None,
                                       "stack": ["/w/t.py:7 in train"]})]
    found = [d for d in judge({p["rank"]: p for p in parts}, 2, {}) if d.code == "MP542"]
    assert [d.message for d in found] == [
        "rank 0 waited 61 s in barrier at t.py:5 (limit 60 s) and the step did not finish: "
        "rank 0 waits in barrier at t.py:5; rank 1 is in no collective (at t.py:7 in train)"]


def test_a_wait_that_ended_or_a_step_that_finished_is_no_hang():
    parts = [_part(0, "succeeded", hang=_hang()), _part(1)]
    assert _codes(parts) == []


def _call(kind, target, call="torch.save"):
    return [{"kind": kind, "call": call, "target": target, "site": "/w/t.py:8", "count": 1}]


@pytest.mark.parametrize(("calls", "nodes", "codes"), [
    ((_call("checkpoint", "/o/m.pt"),) * 2, (0, 0), ["MP543"]),
    ((_call("checkpoint", "/o/m-0.pt"), _call("checkpoint", "/o/m-1.pt")), (0, 0), []),
    ((_call("checkpoint", "/o/m.pt"), []), (0, 0), []),
    ((_call("download", "https://h/d.tar", "requests"),) * 2, (0, 0), ["MP543"]),
    ((_call("download", "https://h/d.tar", "requests"),) * 2, (0, 1), []),   # per node
    ((_call("download", "https://h/0.tar", "requests"),             # each rank its own shard
      _call("download", "https://h/1.tar", "requests")), (0, 0), []),
    ((_call("extract", "/d.tar", "shutil.unpack_archive")           # one archive, two calls
      + _call("extract", "/d.tar", "tarfile.extractall"),) * 2, (0, 0), ["MP543"]),
    ((_call("tracking", "loss", "mlflow.log_metric"),) * 2, (0, 0), ["MP543"]),
])
def test_one_ranks_work_done_by_every_rank(calls, nodes, codes):
    parts = [_part(r, node=nodes[r], calls=list(calls[r])) for r in range(2)]
    assert _codes(parts) == codes


def _sampler(rank, indices, size=5, replicas=2, drop_last=False):
    return [{"sampler": "DistributedSampler", "dataset_size": size, "num_replicas": replicas,
             "rank": rank, "drop_last": drop_last, "shuffle": False, "epoch": 0,
             "count": len(indices), "indices": indices, "passes": 1, "site": "/w/t.py:4"}]


@pytest.mark.parametrize(("dealt", "codes"), [
    (([0, 2, 4], [1, 3, 0]), []),                    # padding repeats one example: MP534's
    (([0, 1, 2], [0, 1, 2]), ["MP521", "MP523"]),    # both built with rank=0
    (([0, 2], [1, 3]), ["MP523"]),                   # example 4 dealt to nobody
])
def test_what_the_samplers_dealt(dealt, codes):
    parts = [_part(r, samplers=_sampler(r, dealt[r])) for r in range(2)]
    assert _codes(parts) == codes


def test_samplers_are_left_to_the_ids_when_ids_were_recorded():
    parts = [{**_part(r, samplers=_sampler(r, [0, 1, 2])), "consumed": [str(r)],
              "population": ["0", "1"]} for r in range(2)]
    assert [d.code for d in check_coordination(parts, world_size=2).findings] == []


def test_records_cut_short_are_judged_without_raising():
    parts = [{"rank": 0, "role": "worker", "status": "succeeded",
              "trace": {"collectives": [{"op": "barrier"}], "devices": [{}], "calls": [{}],
                        "samplers": [{"indices": [None]}], "hang": {"why": 3}}},
             {"rank": 1, "role": "worker", "status": "failed", "trace": "junk"}]
    judge({p["rank"]: p for p in parts}, 2, {})
    odd = [_part(r, "running", hang={"why": "waited past the limit", "waited_s": None},
                 collectives=[{"op": "barrier", "count": "x"}],
                 samplers=[{"indices": ["a"], "site": 3, "dataset_size": "y"}]) for r in (0, 1)]
    assert judge({p["rank"]: p for p in odd}, 2, {}) == []
