"""The diagnosis of a failed step: each layer the guide names, from the facts a backend hands
over (what the launcher saw, the step record), in one table; it never raises, and what it
writes is what the step record's schema allows."""
from __future__ import annotations

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mlpipe.codes import CODES
from mlpipe.judgements.diagnosis import LAYERS, StepFailure, Wire, diagnose
from mlpipe.runtime.record import schema


def _record(layer=None, *, rank=0, type_=None, port=None, reads=None, ranks=1, mismatch=None):
    failure = None if layer is None else {"layer": layer, "type": type_, "message": "m",
                                          "port": port, "rank": rank}
    if mismatch is not None:
        failure["mismatch"] = mismatch
    parts = [{"rank": r, "role": "worker", "failure": failure if r == rank else None,
              "reads_outside_inputs": reads if r == rank else []} for r in range(ranks)]
    return {"format": "mlpipe.step-record", "version": 1, "step": None, "ranks": parts}


CASES = [
    # (what the backend knows, code, layer, rank, port)
    (dict(record=_record("input-contract", port="labels")), "MP900", "contract", 0, "labels"),
    (dict(record=_record("output-completeness", port="model")), "MP901", "contract", 0, "model"),
    (dict(missing_outputs=["model"]), "MP901", "contract", None, "model"),
    (dict(record=_record("output-contract", port="labels")), "MP902", "contract", 0, "labels"),
    (dict(rejected_output=("table", "output 'table' ...")), "MP902", "contract", None, "table"),
    (dict(launch="rendezvous", rank=1, record=_record(ranks=2)), "MP905", "launch", 1, None),
    (dict(launch="exited", rank=1, returncode=1,
          record=_record("launch", rank=1, type_="RuntimeError", ranks=2)),
     "MP906", "launch", 1, None),
    (dict(launch="exited", rank=2, returncode=-9, record=_record(ranks=4)),
     "MP907", "launch", 2, None),
    (dict(returncode=3, record=_record()), "MP907", "launch", None, None),
    (dict(launch="refused", hint="launch fewer"), "MP908", "launch", None, None),
    (dict(launch="coordination", coordination=[{"code": "MP522", "severity": "error"}]),
     "MP910", "launch", None, None),
    (dict(launch="coordination", coordination=[{"code": "MP527", "severity": "error"}]),
     "MP913", "output-ownership", None, None),
    (dict(launch="coordination", coordination=[{"code": "MP526", "severity": "error"},
                                                {"code": "MP524", "severity": "error"}]),
     "MP913", "output-ownership", None, None),
    (dict(launch="coordination", coordination=[{"code": "MP526", "severity": "error"}]),
     "MP917", "logging", None, None),
    (dict(record=_record("output-contract", port="report"), metric_reports=frozenset({"report"})),
     "MP918", "logging", 0, "report"),
    (dict(record=_record("output-contract", port="report", mismatch="population"),
          metric_reports=frozenset({"report"}),
          wiring=(Wire("table", "prepare.train_table", ("train.table",)),)),
     "MP930", "contract", 0, "report"),
    (dict(record=_record("input-contract", port="table"),
          wiring=(Wire("table", "prepare.train_table", ("train.table",)),)),
     "MP930", "contract", 0, "table"),
    (dict(record=_record("step-code", type_="FileNotFoundError", reads=["/home/u/cfg.yml"])),
     "MP921", "dependencies", 0, None),
    (dict(record=_record("step-code", type_="ValueError", reads=["/home/u/cfg.yml"])),
     "MP926", "step-code", 0, None),
    (dict(record=_record("step-code", type_="FileNotFoundError", reads=[])),
     "MP926", "step-code", 0, None),
    (dict(returncode=1), "MP926", "step-code", None, None),
    (dict(not_started=True), "MP927", "launch", None, None),
    (dict(launch="start", rank=0), "MP927", "launch", 0, None),
    (dict(record=_record("runtime")), "MP928", "runtime", 0, None),
]


@pytest.mark.parametrize("facts, code, layer, rank, port", CASES,
                         ids=[f"{c[1]}-{i}" for i, c in enumerate(CASES)])
def test_each_failure_is_diagnosed_at_its_layer(facts, code, layer, rank, port):
    found = diagnose(StepFailure("train", "step 'train' failed: it did\n  last lines ...",
                                 logs={"step": "/l/train.log", "ranks": {"0": "/l/r0.log"}},
                                 **facts))
    assert (found.code.code, found.layer, found.rank, found.port) == (code, layer, rank, port)
    document = found.to_json()
    assert document["name"] == CODES[code].name and document["layer_title"] == LAYERS[layer]
    assert document["message"].startswith("step 'train' failed: it did")
    assert "\n" not in document["message"] and document["hint"]
    assert document["logs"] == {"step": "/l/train.log", "ranks": {"0": "/l/r0.log"}}
    jsonschema.validate({"format": "mlpipe.step-record", "version": 1, "stored": True,
                         "step": None, "ranks": [], "diagnosis": document}, schema())


def test_every_diagnosis_code_is_reachable_from_the_table():
    reached = {c[1] for c in CASES}
    assert reached == {c for c in CODES if "MP900" <= c <= "MP930"}  # the diagnosis range


def test_a_reading_failure_names_the_undeclared_files():
    found = diagnose(StepFailure("fit", "step 'fit' failed: FileNotFoundError: x", record=_record(
        "step-code", type_="FileNotFoundError", reads=[f"/d/{i}" for i in range(5)])))
    assert found.message == ("step 'fit' failed: FileNotFoundError: x; the step read files it "
                             "does not declare as inputs: /d/0, /d/1, /d/2 (and 2 more)")


_json = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                     lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=12)


@settings(max_examples=200, deadline=None)
@given(record=st.none() | st.fixed_dictionaries(
           {"step": st.none() | st.fixed_dictionaries({"failure": st.none() | _json}),
            "ranks": st.lists(st.dictionaries(
                st.sampled_from(["rank", "role", "failure", "reads_outside_inputs"]), _json),
                max_size=3)}),
       launch=st.sampled_from([None, "rendezvous", "exited", "timeout", "refused",
                               "coordination", "start"]),
       returncode=st.none() | st.integers(-15, 3))
def test_diagnose_never_raises_on_what_a_record_may_hold(record, launch, returncode):
    found = diagnose(StepFailure("s", "step 's' failed", record=record, launch=launch,
                                 returncode=returncode))
    assert found.code.code.startswith("MP9") and found.layer in LAYERS


_SHARED = (Wire("table", "prepare.train_table", ("train.table",)),)
_OWN = (Wire("table", "prepare.test_table"),)


@pytest.mark.parametrize("mismatch, wires, code", [
    ("population", _SHARED, "MP930"),   # the wiring: evaluated on the training table
    ("population", _OWN, "MP902"),      # the metric is there; the hint names the edges
    ("population", (), "MP902"),
    ("missing", _SHARED, "MP918"),      # a metric really missing stays MP918, whatever the wiring
    ("scope", _SHARED, "MP918"),
    (None, _SHARED, "MP918"),
])
def test_a_report_on_the_wrong_population_is_not_a_missing_metric(mismatch, wires, code):
    found = diagnose(StepFailure(
        "evaluate", "step 'evaluate' failed: output 'report' does not match its contract: metric "
        "'accuracy' was computed on split 'train' but ...", metric_reports=frozenset({"report"}),
        record=_record("output-contract", port="report", mismatch=mismatch), wiring=wires))
    assert found.code.code == code
    if code == "MP930":
        assert found.message.endswith(
            "; its output 'report' was computed on the wrong population because input 'table' "
            "is wired to 'prepare.train_table', the artifact 'train.table' trains on (edge "
            "'prepare.train_table' -> 'evaluate.table')")
        assert found.hint.startswith("wire 'evaluate.table' to the held-out artifact")
    if code == "MP902":
        assert "compute it on the population the contract requires" in found.hint
        assert ("'evaluate.table' <- 'prepare.test_table'" in found.hint) == bool(wires)
    if code == "MP918":
        assert found.hint.startswith("compute and log the metric")


def test_an_input_rejected_on_another_port_than_the_shared_one_is_not_the_wiring():
    found = diagnose(StepFailure("evaluate", "step 'evaluate' failed: input 'labels' ...",
                                 record=_record("input-contract", port="labels"),
                                 wiring=_SHARED))
    assert found.code.code == "MP900"


def test_a_backend_validated_report_keeps_its_mismatch():
    found = diagnose(StepFailure("evaluate", "step 'evaluate': output 'report' ...",
                                 rejected_output=("report", "..."), mismatch="population",
                                 metric_reports=frozenset({"report"}), wiring=_SHARED))
    assert (found.code.code, found.port, found.rank) == ("MP930", "report", None)


def test_an_azure_step_is_diagnosed_with_the_wiring_its_plan_recorded():
    from mlpipe.backends.azure.ingest import _diagnosed

    planned = [w.to_dict() for w in _SHARED] + [{"port": 3}, "junk"]  # a hand-edited plan
    record = _record("output-contract", port="report", mismatch="population")
    record["step"] = {"outputs": {"report": {"contract": "metrics-report:held-out"}}}
    found = _diagnosed("evaluate", "step 'evaluate' failed: ...", record, None, planned)
    assert found["diagnosis"]["code"] == "MP930"
    assert _diagnosed("evaluate", "m", record, None, None)["diagnosis"]["code"] == "MP902"
