"""benchmarks/bench_suite.py counts what pytest's own JUnit report says: a test run is one that
passed or failed; a skip, expected or not, is counted apart and never as run."""
from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]

SUITE = '''
import pytest

def test_passes():
    pass

def test_fails():
    assert False

@pytest.mark.skip(reason="a command job, not a pipeline job")
def test_skips_as_expected():
    pass

@pytest.mark.skip(reason="no OpenMPI here")
def test_skips_for_a_new_reason():
    pass
'''


@pytest.fixture
def bench_suite(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import bench_suite

    return bench_suite


def _report(tmp_path: pathlib.Path, suite: str) -> pathlib.Path:
    (tmp_path / "test_tiny.py").write_text(suite, encoding="utf-8")
    report = tmp_path / "report.xml"
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0",
                    f"--junitxml={report}", str(tmp_path / "test_tiny.py")], cwd=tmp_path,
                   capture_output=True, check=False)
    return report


def _goals(bench_suite, runs, collected):
    from goals import Goals

    goals = Goals()
    bench_suite.judge(goals, "make test", runs, collected, 60)
    return {g.name.split(",")[1].strip(): g for g in goals.goals}


@pytest.mark.parametrize(("suite", "ran", "skipped", "expected", "met"), [
    # the expected skip is not run, and not held against the run either; the other skip is
    (SUITE, 2, 2, 1, False),
    (SUITE.replace('@pytest.mark.skip(reason="no OpenMPI here")\n', ""), 3, 1, 1, True),
])
def test_a_run_counts_passed_and_failed_and_skips_apart(tmp_path, bench_suite, suite, ran,
                                                         skipped, expected, met):
    run = bench_suite.Run(wall=1.0, cpu=1.0, status=1)
    bench_suite.read_report(run, _report(tmp_path, suite))
    assert (run.ran(), run.count("skipped"), run.expected_skips()) == (ran, skipped, expected)
    found = _goals(bench_suite, [run], collected=len(run.outcomes))
    counted = found["tests run (passed + failed) / collected less expected skips"]
    assert counted.met is met
    assert counted.detail == (f"{ran} run of {len(run.outcomes) - expected} "
                              f"({len(run.outcomes)} collected, {skipped} skipped, "
                              f"{expected} expected)")


def test_the_oversubscribed_runs_are_make_or_the_slice_as_make_test_fast_runs_it(bench_suite):
    assert bench_suite._command("test-fast", [], None) == ["make", "test-fast"]
    assert bench_suite._command("test-fast", [], 4) == ["make", "test-fast", "PYTEST_WORKERS=4"]
    sliced = bench_suite._command("test-fast", ["tests/test_dsl.py"], 4)
    assert sliced[1:] == ["-m", "pytest", "-m", "not slow", "-p", "no:cacheprovider", "-n", "4",
                          "--dist", "worksteal", "tests/test_dsl.py"]
