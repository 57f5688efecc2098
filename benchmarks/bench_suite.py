"""Benchmark: the suite as a contributor and CI pay for it, run after run (issue 29).

Runs ``make test`` (ruff, vulture, pyright and its ceiling, then pytest in parallel with the
throw-away PostgreSQL server: what ``.ci/run`` runs) ``--runs`` times in a row on the same
checkout, then ``make test-fast`` once, and reads each run's JUnit XML (pytest's own report,
``--junitxml``) for what every test did. Per run it reports:

- wall: the whole ``make`` command, start to exit (the goal's figure: the loop people wait
  for), and pytest's part of it (the report's own time);
- CPU: user + system of every process ``make`` waited for (``RUSAGE_CHILDREN``);
- the baseline measured in the same run: one process running the same tests, as the sum of
  the tests' own times (setup, call and teardown, from the report); its ratio to pytest's wall
  is what running in parallel buys;
- run (passed + failed) and skipped (expected or not), apart, against the count ``pytest
  --collect-only`` collects first;
- the slowest tests.

Across the runs: a test that failed in one run and passed in another is a flake; one that
failed in every run is a failure. A skip whose reason is not one of ``EXPECTED_SKIPS`` (a test
skipped because this machine lacks PostgreSQL, Chromium or OpenMPI, say) is a new skip.

Goals (docs/performance.md, "The suite"): ``make test`` <= 12 minutes wall in every run, every
collected test run in every run (passed or failed; an expected skip is counted apart, not as
run), no failure and no flake across the runs (five by default), no
new skip; ``make test-fast`` < 3 minutes. ``--quick`` (``make bench-check``) runs only ``make
test-fast``, once. Run it on a quiet machine: the goals are wall-clock times, and the suite's
own processes are what keeps both cores busy.

``--oversubscribed`` asks the other question (issue 41): does the suite pass on a machine
busier than it has cores? It runs ``make test-fast`` (or, with ``--slice PATH ...``, pytest on
those test files, the not-slow ones, in parallel as ``make test-fast`` runs them) twice: once
with the default workers, alone (the baseline), then with ``PYTEST_WORKERS`` at twice the cores
while a second run of the same tests goes beside it, from a fresh clone of this checkout (its
own files, the same venv). Goals: no failure in either oversubscribed run, and its wall no more
than 2 x 2 = 4 times the baseline's (twice the work on the same cores, and a factor 2 for the
oversubscription's switching); the ratio is the figure.

    python benchmarks/bench_suite.py [--runs 5] [--quick] [--goals FILE]
    python benchmarks/bench_suite.py --oversubscribed [--slice tests/test_dsl.py ...]
"""
from __future__ import annotations

import argparse
import os
import re
import resource
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from goals import Goals

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "build" / "bench-suite"
TEST_GOAL_S = 12 * 60
FAST_GOAL_S = 3 * 60
#: The reasons a test of the suite may skip on the reference machine. The one there is: the
#: pipeline-job property of tests/backends/azure/test_skeleton.py, over the corpus's command
#: jobs, to which it does not apply. Any other reason is a test the machine did not run.
EXPECTED_SKIPS = ("a command job, not a pipeline job",)


@dataclass
class Run:
    wall: float
    cpu: float
    status: int
    pytest_wall: float = 0.0
    outcomes: dict[str, str] = field(default_factory=dict)   # test id -> passed/failed/skipped
    skips: Counter[str] = field(default_factory=Counter)      # reason -> count
    serial: float = 0.0                                       # the tests' own times, summed
    slowest: list[tuple[float, str]] = field(default_factory=list)

    def count(self, outcome: str) -> int:
        return sum(1 for o in self.outcomes.values() if o == outcome)

    def ran(self) -> int:
        """The tests that ran: passed + failed (a skip, expected or not, did not run)."""
        return self.count("passed") + self.count("failed")

    def expected_skips(self) -> int:
        return sum(n for reason, n in self.skips.items() if _expected(reason))


def _expected(reason: str) -> bool:
    return any(reason.startswith(known) for known in EXPECTED_SKIPS)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def collected(marker: str | None) -> int:
    """How many tests pytest collects (with ``-m marker``, as ``make test-fast`` selects)."""
    args = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
    if marker:
        args += ["-m", marker]
    out = subprocess.run(args, cwd=ROOT, capture_output=True, text=True).stdout
    found = re.search(r"(\d+)(?:/\d+)? tests? collected", out)
    if not found:
        raise SystemExit(f"pytest --collect-only printed no count:\n{out[-2000:]}")
    return int(found.group(1))


def read_report(run: Run, report: Path) -> None:
    """Each test's outcome, the skips' reasons and the tests' own times, from JUnit XML."""
    suites = ET.parse(report).getroot()
    suite = suites if suites.tag == "testsuite" else suites.find("testsuite")
    assert suite is not None, f"{report}: no testsuite element"
    run.pytest_wall = float(suite.get("time", 0))
    times: list[tuple[float, str]] = []
    for case in suite.iter("testcase"):
        test = f"{case.get('classname')}::{case.get('name')}"
        spent = float(case.get("time", 0))
        run.serial += spent
        times.append((spent, test))
        if case.find("failure") is not None or case.find("error") is not None:
            run.outcomes[test] = "failed"
        elif (skipped := case.find("skipped")) is not None:
            run.outcomes[test] = "skipped"
            reason = (skipped.get("message") or "").removeprefix("Skipped: ")
            run.skips[reason] += 1
        else:
            run.outcomes[test] = "passed"
    run.slowest = sorted(times, reverse=True)[:5]


def _command(target: str, tests: list[str], workers: int | None) -> list[str]:
    """``make TARGET`` (with ``PYTEST_WORKERS``), or pytest on ``tests`` as ``make test-fast``
    runs it (not slow, in parallel, worksteal)."""
    if not tests:
        return ["make", target, *([f"PYTEST_WORKERS={workers}"] if workers else [])]
    n = workers or (os.cpu_count() or 1) + 1
    return [sys.executable, "-m", "pytest", "-m", "not slow", "-p", "no:cacheprovider",
            "-n", str(n), "--dist", "worksteal", *tests]


def run_make(target: str, label: str, *, tests: list[str] | None = None,
             workers: int | None = None, cwd: Path = ROOT) -> Run:
    OUT.mkdir(parents=True, exist_ok=True)
    report, log = OUT / f"{label}.xml", OUT / f"{label}.log"
    report.unlink(missing_ok=True)
    env = dict(os.environ)
    env["PYTEST_ADDOPTS"] = " ".join(filter(None, [env.get("PYTEST_ADDOPTS"),
                                                    f"--junitxml={report}"]))
    if tests or cwd != ROOT:  # this checkout's mlpipe (a clone's own), whichever venv runs it
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(cwd), env.get("PYTHONPATH")]))
    command = _command(target, tests or [], workers)
    cpu0, t0 = _children_cpu(), time.perf_counter()
    with log.open("w") as sink:
        status = subprocess.run(command, cwd=cwd, env=env, stdout=sink,
                                stderr=subprocess.STDOUT).returncode
    run = Run(time.perf_counter() - t0, _children_cpu() - cpu0, status)
    if report.exists():
        read_report(run, report)
    if tests:
        target = f"{target} slice ({len(tests)} files, {workers or 'default'} workers)"
    print(f"{label}: make {target} exit {status}, wall {run.wall:.0f} s "
          f"(pytest {run.pytest_wall:.0f} s), CPU {run.cpu / 60:.1f} min; "
          f"{run.ran()} run ({run.count('passed')} passed, {run.count('failed')} failed), "
          f"{run.count('skipped')} skipped ({run.expected_skips()} expected); one process "
          f"would take {run.serial:.0f} s "
          f"({run.serial / max(run.pytest_wall, 1e-9):.2f}x pytest's wall); log {log}",
          flush=True)
    for spent, test in run.slowest:
        print(f"    {spent:6.1f} s  {test}")
    for test, outcome in sorted(run.outcomes.items()):
        if outcome == "failed":
            print(f"    FAILED {test}")
    return run


def judge(goals: Goals, name: str, runs: list[Run], expected: int, limit_s: float) -> None:
    """The goals of one target over its runs: time, count, failures and flakes, skips."""
    slowest = max(r.wall for r in runs)
    goals.check(f"{name}, the slowest of {len(runs)} run(s)", slowest, "<=", limit_s, unit="s",
                detail="wall: " + ", ".join(f"{r.wall:.0f} s" for r in runs))
    # run = passed + failed; an expected skip is not a test run, so it is taken off what each
    # run had to run, and reported apart (an unexpected skip is its own goal below)
    short = min(runs, key=lambda r: r.ran() / max(expected - r.expected_skips(), 1))
    due = expected - short.expected_skips()
    goals.check(f"{name}, tests run (passed + failed) / collected less expected skips, the "
                f"fewest of {len(runs)} run(s)", short.ran() / max(due, 1), ">=", 1.0,
                detail=f"{short.ran()} run of {due} ({expected} collected, "
                       f"{short.count('skipped')} skipped, {short.expected_skips()} expected)")
    failed = {t for r in runs for t, o in r.outcomes.items() if o == "failed"}
    always = {t for t in failed if all(r.outcomes.get(t) == "failed" for r in runs)}
    goals.check(f"{name}, tests that failed in any of {len(runs)} run(s)", len(failed), "<=", 0,
                unit="tests", detail=(f"{len(failed) - len(always)} flaky, {len(always)} in "
                                      f"every run" + "".join(f"; {t}" for t in sorted(failed))))
    broken = sum(r.status != 0 and not any(o == "failed" for o in r.outcomes.values())
                 for r in runs)
    goals.check(f"{name}, runs that failed outside pytest's tests (lint, types, setup)",
                broken, "<=", 0, unit="runs")
    new = Counter[str]()
    for r in runs:
        for reason, count in r.skips.items():
            if not _expected(reason):
                new[reason] = max(new[reason], count)
    goals.check(f"{name}, skips for a reason not expected", sum(new.values()), "<=", 0,
                unit="tests", detail="; ".join(f"{n} x {why}" for why, n in new.items()))


def _clone_beside() -> Path:
    """A fresh clone of this checkout (its committed state) for the run that goes beside."""
    beside = OUT / "beside"
    if beside.exists():
        subprocess.run(["rm", "-rf", str(beside)], check=True)
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(beside)], check=True)
    return beside


def oversubscribed(goals: Goals, tests: list[str]) -> None:
    """The tests alone with the default workers, then at twice the cores with a second run of
    them beside, from a fresh clone (docs/performance.md, "The suite under load")."""
    cores = os.cpu_count() or 1
    baseline = run_make("test-fast", "alone", tests=tests)
    beside_root = _clone_beside()
    with ThreadPoolExecutor(max_workers=2) as pool:
        main_run = pool.submit(run_make, "test-fast", "oversubscribed", tests=tests,
                               workers=2 * cores)
        other = pool.submit(run_make, "test-fast", "beside", tests=tests, workers=2 * cores,
                            cwd=beside_root)
        loaded, companion = main_run.result(), other.result()
    print(f"load average {os.getloadavg()[0]:.1f} after the two runs side by side", flush=True)
    for name, run in (("alone", baseline), ("oversubscribed", loaded), ("beside", companion)):
        goals.check(f"test-fast{' slice' if tests else ''} {name}: tests that failed",
                    run.count("failed") + int(run.status != 0 and not run.count("failed")),
                    "<=", 0, unit="tests", detail=f"{run.ran()} run, exit {run.status}")
    goals.check(f"test-fast{' slice' if tests else ''} at {2 * cores} workers with a second run "
                f"beside / alone at the default workers (wall)",
                loaded.wall / max(baseline.wall, 1e-9), "<=", 4.0,
                detail=f"{loaded.wall:.0f} s / {baseline.wall:.0f} s; the run beside "
                       f"{companion.wall:.0f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="consecutive runs of make test")
    parser.add_argument("--quick", action="store_true", help="make test-fast once, nothing else")
    parser.add_argument("--oversubscribed", action="store_true",
                        help="test-fast alone, then at 2x the cores with a second run beside")
    parser.add_argument("--slice", nargs="+", default=[], metavar="PATH",
                        help="with --oversubscribed: these test files instead of make test-fast")
    Goals.add_argument(parser)
    args = parser.parse_args()
    goals = Goals.from_args(args)
    print(f"load average {os.getloadavg()[0]:.1f}, {os.cpu_count()} cores", flush=True)
    if args.oversubscribed:
        oversubscribed(goals, args.slice)
        goals.save()
        return
    if not args.quick:
        expected = collected(None)
        print(f"pytest collects {expected} tests", flush=True)
        runs = [run_make("test", f"test-{i + 1}") for i in range(args.runs)]
        judge(goals, "make test", runs, expected, TEST_GOAL_S)
    expected_fast = collected("not slow")
    print(f"pytest collects {expected_fast} tests not marked slow", flush=True)
    judge(goals, "make test-fast", [run_make("test-fast", "test-fast")], expected_fast,
          FAST_GOAL_S)
    print(f"load average {os.getloadavg()[0]:.1f} at the end", flush=True)
    goals.save()


if __name__ == "__main__":
    main()
