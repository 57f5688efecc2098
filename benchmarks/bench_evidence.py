"""Benchmark: `mlpipe evidence` in a store of 100,000 step runs, and `--verify` against hashing.

1. A throw-away project runs the evidence-test pipeline once (a real candidate), then 100,000
   step runs (25,000 runs of 4 steps, with artifacts, links and metrics) are bulk-inserted
   around it. `mlpipe evidence C` (text, then JSON) is timed as a whole process, first call
   (builds and seals) and repeated calls (builds, finds it sealed), each alternated with the
   baseline, the interpreter's start (`python -c pass`), and with `mlpipe --version`: CPU time
   (user + system of the child), best of the runs, with the wall time beside it.
2. A candidate whose model is one large file: `mlpipe evidence C --verify` (whole process)
   against raw hashing of the same bytes in one process (BLAKE3 + SHA-256, what verify must
   compute at least once each).

Goal: a sealed bundle shown in at most 4x `python -c pass` of CPU (issue 29, which replaced issue
13's 1.5x `mlpipe --version` once `--version` itself became the lighter floor; bench_store.py
holds the same goal at 10,000 to 1,000,000 step runs and for the other read commands). The
ratio to `--version` is still printed.

Run: .venv/bin/python benchmarks/bench_evidence.py [--quick] [--steps 100000] [--model-mb 256]
"""
from __future__ import annotations

import argparse
import hashlib
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

import blake3

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from goals import Goals  # noqa: E402

BIG = '''
import json
from pathlib import Path
from mlpipe import Candidate, Input, Output, Param, component, pipeline
from mlpipe.runtime import log_metric


@component(version="1.0.0")
def big(data: Input["uri_file"], model: Output["uri_folder"], mb: Param[int] = 64):
    block = bytes(range(256)) * 4096
    with open(Path(model, "weights.bin"), "wb") as fh:
        for _ in range(mb):
            fh.write(block)
    log_metric("train_loss", 0.25, population="train, 8 examples")


@component(version="1.0.0")
def score(model: Input["uri_folder"], report: Output["uri_file"]):
    with open(Path(model, "weights.bin"), "rb") as fh:
        fh.read(16)
    log_metric("accuracy", 0.5, population="test, 8 examples")
    Path(report).write_text(json.dumps({"population": {"split": "test", "examples": 8},
                                        "metrics": {"accuracy": {"value": 0.5,
                                                                 "scope": "global"}}}))


@pipeline(name="bench-big")
def big_model(data, mb=64):
    model = big(data=data, mb=mb).model
    return Candidate(model=model, evaluation=score(model=model).report)
'''


def _median_wall(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _clock(commands: dict[str, Callable[[], object]], repeat: int
           ) -> dict[str, tuple[float, float]]:
    """Each command's best CPU time (user + system of its child processes) and best wall time
    over ``repeat`` rounds, the commands taking turns in each round."""
    cpu: dict[str, list[float]] = {name: [] for name in commands}
    wall: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(repeat):
        for name, fn in commands.items():
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            fn()
            wall[name].append(time.perf_counter() - start)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu[name].append(after.ru_utime + after.ru_stime
                             - before.ru_utime - before.ru_stime)
    return {name: (min(cpu[name]), min(wall[name])) for name in commands}


def _fill(url: str, step_runs: int) -> None:
    """Bulk-insert ``step_runs`` step runs of 4-step runs, with their rows around them."""
    from sqlalchemy import insert

    from mlpipe.evidence.storage import models as m
    from mlpipe.evidence.storage.store import Store

    store = Store.open(url)
    t0 = datetime(2026, 1, 1)
    with store.engine.begin() as conn:
        conn.execute(insert(m.PipelineSpecRow), [{"digest": "sha256:" + "f" * 64,
                                                  "name": "filler", "spec": {}}])
        conn.execute(insert(m.ComponentVersion), [
            {"id": 10_000 + i, "name": f"c{i}", "version": "1", "spec_digest": f"sha256:{i:064x}",
             "code_digest": f"sha256:{i:064x}", "spec": {}} for i in range(4)])
        runs, steps, arts, links, metrics = [], [], [], [], []
        for r in range(step_runs // 4):
            rid = f"r-f{r:09x}"
            runs.append({"id": rid, "pipeline_name": "filler",
                         "pipeline_digest": "sha256:" + "f" * 64,
                         "target": "local", "params": {"epochs": r % 7}, "status": "succeeded",
                         "started_at": t0 + timedelta(seconds=r), "options": {}})
            for k in range(4):
                sid = f"s-f{r:07x}{k:04x}"
                n = r * 4 + k
                steps.append({"id": sid, "run_id": rid, "step": f"step{k}",
                              "component_version_id": 10_000 + k, "compute": {}, "topology": {},
                              "cache_key": f"sha256:{n:064x}", "key_material": {"params": {}},
                              "cacheable": True, "status": "executed",
                              "started_at": t0 + timedelta(seconds=r, milliseconds=k)})
                arts.append({"id": 100_000 + n, "digest": f"blake3:{n:064x}", "kind": "uri_file",
                             "size": 10, "file_count": 1, "location": f"/nowhere/{n}"})
                links.append({"step_run_id": sid, "direction": "output", "port": "out",
                              "artifact_id": 100_000 + n})
                metrics.append({"step_run_id": sid, "name": "loss", "value": 1.0 / (n + 1),
                                "scope": "global", "rank": None, "population": "train"})
        for model, rows in ((m.Run, runs), (m.StepRun, steps), (m.Artifact, arts),
                            (m.StepArtifact, links), (m.Metric, metrics)):
            for i in range(0, len(rows), 20_000):
                conn.execute(insert(model), rows[i:i + 20_000])
    store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--model-mb", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--quick", action="store_true",
                        help="10,000 step runs, a 64 MiB model, best of 5")
    Goals.add_argument(parser)
    args = parser.parse_args()
    goals = Goals.from_args(args)
    if args.quick:
        args.steps, args.model_mb, args.repeat = 10_000, 64, 5
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed: modules load from bytecode
    from bundle_project import BundleProject

    with tempfile.TemporaryDirectory() as tmp:
        proj = BundleProject(Path(tmp) / "proj")
        cand = proj.submit()
        url = f"sqlite:///{proj.root / 'evidence' / 'store.sqlite'}"
        start = time.perf_counter()
        _fill(url, args.steps)
        print(f"store: 1 real run + {args.steps:,} step runs inserted in "
              f"{time.perf_counter() - start:.1f} s")

        def cli(*a: str) -> str:
            done = proj.cli(*a)
            assert done.returncode == 0, done.stderr
            return done.stdout

        first_start = time.perf_counter()
        cli("evidence", cand)
        first = time.perf_counter() - first_start
        floor = [sys.executable, "-c", "pass"]
        took = _clock({"floor": lambda: subprocess.run(floor, check=True),
                       "version": lambda: cli("--version"),
                       "text": lambda: cli("evidence", cand),
                       "json": lambda: cli("evidence", cand, "--format", "json")}, args.repeat)
        base, version = took["floor"][0], took["version"][0]
        print(f"python -c pass (the interpreter's start)    CPU {base:.3f} s  "
              f"wall {took['floor'][1]:.3f} s")
        print(f"mlpipe --version (interpreter + CLI import)  CPU {version:.3f} s  "
              f"wall {took['version'][1]:.3f} s")
        print(f"mlpipe evidence, first call (build + seal)   wall {first:.3f} s")
        for name in ("text", "json"):
            cpu, wall = took[name]
            print(f"mlpipe evidence --format {name}   CPU {cpu:.3f} s  wall {wall:.3f} s  "
                  f"({cpu / base:.2f}x `python -c pass`, {cpu / version:.2f}x `--version`)")
            goals.check(f"`mlpipe evidence C --format {name}`, sealed, {args.steps:,} step runs",
                        cpu / base, "<=", 4, unit="x `python -c pass` (CPU)",
                        detail=f"CPU {cpu:.3f} s vs {base:.3f} s; {cpu / version:.2f}x "
                               f"`mlpipe --version`; best of {args.repeat}")

        (proj.root / "big.py").write_text(BIG)
        done = proj.cli("submit", "big.py", "--input", "data=data.txt", "--param",
                        f"mb={args.model_mb}")
        assert done.returncode == 0, done.stderr
        big = re.search(r"^candidate (c-[0-9a-f]+)$", done.stdout, re.M).group(1)
        cli("evidence", big)
        weights = next((proj.root / "evidence" / "artifacts").rglob("weights.bin"))
        size = weights.stat().st_size

        def raw() -> None:
            b3, sha = blake3.blake3(max_threads=blake3.blake3.AUTO), hashlib.sha256()
            b3.update_mmap(str(weights))
            with open(weights, "rb") as fh:
                while chunk := fh.read(1 << 20):
                    sha.update(chunk)

        verify_t = _median_wall(lambda: cli("evidence", big, "--verify"), 3)
        raw_t = _median_wall(raw, 3)
        print(f"--verify of a {size / 2**20:.0f} MiB model: {verify_t:.3f} s; raw BLAKE3 + "
              f"SHA-256 of the same bytes {raw_t:.3f} s ({size / 2**20 / raw_t:.0f} MiB/s); "
              f"verify / raw = {verify_t / raw_t:.2f}x (verify also starts a process: "
              f"{base:.3f} s)")
        print(f"(cpu count {os.cpu_count()}, load average {os.getloadavg()[0]:.2f})")
    goals.save()


if __name__ == "__main__":
    main()
