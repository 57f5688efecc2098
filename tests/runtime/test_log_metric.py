"""log_metric inside a step: one entry per call in the rank's part of the record, with scope
and rank."""
import json

import pytest

from mlpipe.runtime import log_metric, record


@pytest.fixture(autouse=True)
def fresh_part():
    record.reset()
    yield
    record.reset()


def test_log_metric_adds_an_entry_to_the_ranks_part(tmp_path, monkeypatch):
    monkeypatch.setenv("MLPIPE_STEP_DIR", str(tmp_path))
    monkeypatch.setenv("RANK", "3")
    log_metric("accuracy", 0.5, scope="partial", population="shard 3")
    log_metric("loss", 2)
    record.reset()
    lines = json.loads((tmp_path / "rank-3.json").read_text())["metrics"]
    assert all(line.pop("at") for line in lines)
    assert lines == [{"name": "accuracy", "value": 0.5, "scope": "partial", "rank": 3,
                      "population": "shard 3"},
                     {"name": "loss", "value": 2.0, "scope": "global", "rank": 3,
                      "population": None}]


@pytest.mark.parametrize("args, kwargs, message", [
    (("acc", 0.5), {"scope": "local"}, r"metric 'acc' has scope 'local'; use 'global' or "
                                       r"'partial'"),
    (("acc", float("nan")), {}, r"metric 'acc' has value nan; log a finite number"),
    (("", 1.0), {}, r"metric name '' is not a non-empty string"),
])
def test_bad_metrics_are_refused(args, kwargs, message, tmp_path, monkeypatch):
    monkeypatch.setenv("MLPIPE_STEP_DIR", str(tmp_path))
    with pytest.raises(ValueError, match=message):
        log_metric(*args, **kwargs)


def test_outside_a_step_it_warns_and_records_nothing(monkeypatch):
    monkeypatch.delenv("MLPIPE_STEP_DIR", raising=False)
    with pytest.warns(RuntimeWarning, match=r"log_metric\('acc'\) outside an mlpipe step"):
        log_metric("acc", 1.0)
