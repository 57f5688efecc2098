"""log_metric inside a step: one JSON line per call, with scope and rank."""
import json

import pytest

from mlpipe.runtime import log_metric


def test_log_metric_appends_a_json_line(tmp_path, monkeypatch):
    monkeypatch.setenv("MLPIPE_STEP_DIR", str(tmp_path))
    monkeypatch.setenv("RANK", "3")
    log_metric("accuracy", 0.5, scope="partial", population="shard 3")
    log_metric("loss", 2)
    lines = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
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
