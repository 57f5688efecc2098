"""What retention keeps (``mlpipe.evidence.records.retention``), as a property over random stores:
exactly the artifacts a candidate's run (unless its newest decision rejects it) or a running
run consumed or produced, and its model, whatever runs share; each artifact's newest use."""
from __future__ import annotations

import tempfile
from datetime import datetime, timedelta
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mlpipe.evidence.records.reader import Reader
from mlpipe.evidence.records.retention import retained
from mlpipe.evidence.storage import models as m
from mlpipe.evidence.storage.store import Store

ARTIFACTS = 6
_run = st.fixed_dictionaries({
    "steps": st.lists(st.tuples(st.integers(0, ARTIFACTS - 1), st.integers(0, ARTIFACTS - 1)),
                      min_size=1, max_size=3),
    "candidate": st.none() | st.integers(0, ARTIFACTS - 1),
    "verdicts": st.lists(st.sampled_from(["accepted", "rejected"]), max_size=3),
    "running": st.booleans()})


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(runs=st.lists(_run, min_size=1, max_size=4))
def test_retained_keeps_exactly_what_candidates_and_running_runs_used(runs):
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{Path(folder) / 'store.sqlite'}"
        store = Store.open(url)
        try:
            expected, used, verdicts = _fill(store, runs)
        finally:
            store.close()
        with Reader.open(url) as r:
            found = retained(r)
    assert found.protected == expected
    assert set(found.sizes) == {f"blake3:{i:064x}" for i in range(ARTIFACTS)}
    assert {d for d, when in found.last_used.items() if when is not None} == used
    rejected = {c for c, said in verdicts.items() if said[-1:] == ["rejected"]}
    assert (set(found.candidates), set(found.rejected)) == (set(verdicts) - rejected, rejected)
    assert len(found.running) == sum(1 for r in runs if r["running"])


def _fill(store: Store, runs: list[dict]) -> tuple[set[str], set[str], dict[str, list[str]]]:
    """The store ``runs`` describe; what must be protected, what was used, and each
    candidate's verdicts in order (a run reproducing a model names the same candidate)."""
    pipe = store.pipeline_spec(f"sha256:{0:064x}", "p", {})
    comp = store.component_version("c", "1", f"sha256:{1:064x}", f"sha256:{2:064x}", {})
    arts = [store.artifact(f"blake3:{i:064x}", "uri_file", 1, 1, f"/nowhere/{i}")
            for i in range(ARTIFACTS)]
    running: set[str] = set()
    used: set[str] = set()
    runs_of: dict[str, list[set[str]]] = {}
    verdicts: dict[str, list[str]] = {}
    model: dict[str, str] = {}
    for spec in runs:
        run_id = store.begin_run(pipeline=pipe, target="local", params={}, inputs={}, code=None,
                                 options={})
        touched = set()
        for k, (source, product) in enumerate(spec["steps"]):
            sid = store.begin_step_run(
                inputs={"in": arts[source]}, run_id=run_id, step=f"s{k}",
                component_version_id=comp.id, environment_id=None, compute={}, topology={},
                cache_key=None, key_material=None, status=m.RUNNING)
            store.complete_step_run(
                sid, status=m.EXECUTED, message=None, cacheable=True, topology={},
                outputs={"out": (arts[product].digest, "uri_file", 1, 1, f"/nowhere/{product}")},
                metrics=[])
            touched |= {arts[source].digest, arts[product].digest}
        used |= touched
        if spec["candidate"] is not None:
            cand = store.register_candidate(run_id, arts[spec["candidate"]], None, None)
            model[cand] = arts[spec["candidate"]].digest
            runs_of.setdefault(cand, []).append(touched)
            verdicts.setdefault(cand, [])
            for verdict in spec["verdicts"]:
                _decide(store, cand, verdict, sum(map(len, verdicts.values())))
                verdicts[cand].append(verdict)
        if spec["running"]:
            running |= touched
        else:
            store.finish_run(run_id, m.SUCCEEDED)
    expected = set(running)
    for cand, said in verdicts.items():
        if said[-1:] != ["rejected"]:
            expected |= {model[cand]}.union(*runs_of[cand])
    return expected, used, verdicts


def _decide(store: Store, cand: str, verdict: str, n: int) -> None:
    """The ``n``-th decision of the store, on a bundle of its own, newer than every other."""
    when = datetime(2026, 1, 1) + timedelta(minutes=n)
    digest = f"sha256:{n:064x}"
    with store.session() as s:
        s.add(m.BundleRow(digest=digest, candidate_id=cand, previous_digest=None,
                          sealed_at=when, content=b"{}"))
        s.flush()
        s.add(m.Decision(candidate_id=cand, bundle_digest=digest, verdict=verdict,
                         reviewer="lee", note="n", policy=None, decided_at=when))
