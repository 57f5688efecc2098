"""tests/timing.py: the suite's time limits follow the measured slowdown of a process here."""
from __future__ import annotations

import timing


def test_the_slowdown_is_measured_between_one_and_the_ceiling(monkeypatch):
    monkeypatch.delenv("MLPIPE_TEST_SLOWDOWN", raising=False)
    monkeypatch.setattr(timing, "_measured", None)
    factor = timing.slowdown()
    assert 1.0 <= factor <= timing.MAX_SLOWDOWN
    assert timing.limit(30) == 30 * factor


def test_a_given_slowdown_replaces_the_measurement_and_is_held_to_its_range(monkeypatch):
    monkeypatch.setenv("MLPIPE_TEST_SLOWDOWN", "3")
    assert timing.limit(20) == 60
    monkeypatch.setenv("MLPIPE_TEST_SLOWDOWN", "0.2")
    assert timing.slowdown() == 1.0
    monkeypatch.setenv("MLPIPE_TEST_SLOWDOWN", "500")
    assert timing.slowdown() == timing.MAX_SLOWDOWN


def test_a_measurement_stands_for_a_minute_then_is_taken_again(monkeypatch):
    monkeypatch.delenv("MLPIPE_TEST_SLOWDOWN", raising=False)
    monkeypatch.setattr(timing, "_measured", (timing.time.monotonic(), 7.0))
    assert timing.slowdown() == 7.0
    monkeypatch.setattr(timing, "_measured", (timing.time.monotonic() - 61, 7.0))
    assert 1.0 <= timing.slowdown() <= timing.MAX_SLOWDOWN
    assert timing._measured is not None and timing._measured[0] > timing.time.monotonic() - 5
