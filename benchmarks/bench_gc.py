"""`mlpipe gc --dry-run` on a store of 10,000 artifacts (issue 12: under 2 s), a whole process,
against `mlpipe --version` (the interpreter starting and importing the CLI) in the same run.

The store is a real project: the evidence-test pipeline submitted once (a real candidate with a
sealed bundle), then filler bulk-inserted with the store's own schema: runs of 4 steps, each
step's output an artifact whose file really is in the artifact store
(``evidence/artifacts/blake3/<2 hex>/<hex>/data``), a candidate for every 10th run (its 4
artifacts protected), half the runs a year old. gc reads the store (what is protected, when
each artifact was last used) and walks the artifact store; the dry run removes nothing, so
every repetition sees the same store. Stores are kept under ``build/bench-gc/`` and reused.

Each figure is the best of ``--repeat`` runs, alternated with the floor; wall and CPU time.
Run: ``.venv/bin/python benchmarks/bench_gc.py [--quick] [--artifacts N]``.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import sqlite3
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench_store import _schema_head, cli  # the same project CLI and schema head
from goals import Goals

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / "build" / "bench-gc"
FIXTURE = ROOT / "tests" / "fixtures" / "evidence" / "review.py"
FILL_VERSION = 1
GOAL_S = 2.0
STEPS_PER_RUN = 4
CANDIDATE_EVERY = 10


def fill(project: Path, artifacts: int) -> None:
    """``artifacts`` filler artifacts: rows (runs of 4 steps) and their files on disk."""
    db = project / "evidence" / "store.sqlite"
    root = project / "evidence" / "artifacts"
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=OFF")
    now = datetime.now(UTC).replace(tzinfo=None)
    runs = artifacts // STEPS_PER_RUN
    with conn:
        conn.execute("INSERT INTO pipeline_specs (digest, name, spec) VALUES (?, ?, '{}')",
                     (f"sha256:{0:064x}", "filler"))
        conn.executemany(
            "INSERT INTO component_versions (id, name, version, spec_digest, code_digest, spec) "
            "VALUES (?, ?, '1', ?, ?, '{}')",
            [(10_000 + k, f"step{k}", f"sha256:c{k:063x}", f"sha256:d{k:063x}")
             for k in range(STEPS_PER_RUN)])
        rows, steps, arts, links, cands = [], [], [], [], []
        for r in range(runs):
            when = now - timedelta(days=365 if r % 2 else 1, seconds=r)
            stamp = when.strftime("%Y-%m-%d %H:%M:%S.%f")
            rows.append((f"r-f{r:09x}", stamp, stamp))
            for k in range(STEPS_PER_RUN):
                n = r * STEPS_PER_RUN + k
                hexdigest = f"{n + 1:064x}"
                entry = root / "blake3" / hexdigest[:2] / hexdigest
                entry.mkdir(parents=True, exist_ok=True)
                (entry / "data").write_bytes(b"filler %d\n" % n)
                steps.append((f"s-f{n:011x}", f"r-f{r:09x}", f"step{k}", 10_000 + k,
                              f"sha256:{n:064x}", stamp, stamp))
                arts.append((1_000_000 + n, f"blake3:{hexdigest}", str(entry / "data")))
                links.append((f"s-f{n:011x}", 1_000_000 + n))
            if r % CANDIDATE_EVERY == 0:
                cands.append((f"c-f{r:08x}", f"r-f{r:09x}",
                              1_000_000 + r * STEPS_PER_RUN + STEPS_PER_RUN - 1, stamp))
        conn.executemany(
            "INSERT INTO runs (id, pipeline_name, pipeline_digest, target, params, status, "
            "started_at, finished_at, user, host, options) VALUES (?, 'filler', ?, 'local', "
            "'{}', 'succeeded', ?, ?, 'bench', 'bench-host', '{}')",
            [(rid, f"sha256:{0:064x}", a, b) for rid, a, b in rows])
        conn.executemany(
            "INSERT INTO step_runs (id, run_id, step, component_version_id, compute, topology, "
            "cache_key, key_material, cacheable, status, started_at, finished_at) VALUES "
            "(?, ?, ?, ?, '{}', '{}', ?, '{\"params\": {}}', 1, 'executed', ?, ?)", steps)
        conn.executemany(
            "INSERT INTO artifacts (id, digest, kind, size, file_count, location) "
            "VALUES (?, ?, 'uri_file', 16, 1, ?)", arts)
        conn.executemany(
            "INSERT INTO step_artifacts (step_run_id, direction, port, artifact_id) "
            "VALUES (?, 'output', 'out', ?)", links)
        conn.executemany(
            "INSERT INTO candidates (id, run_id, model_artifact_id, created_at) "
            "VALUES (?, ?, ?, ?)", cands)
    conn.execute("ANALYZE")
    conn.close()


def build(artifacts: int) -> dict:
    """The project of a store with ``artifacts`` filler artifacts: built, or found cached."""
    folder = CACHE / f"{artifacts}-v{FILL_VERSION}-{_schema_head()}"
    ready = folder / "ready.json"
    if ready.exists():
        return json.loads(ready.read_text())
    if folder.exists():
        shutil.rmtree(folder)
    project = folder / "project"
    project.mkdir(parents=True)
    shutil.copy(FIXTURE, project / "review.py")
    (project / "mlpipe.toml").write_text("")
    (project / "data.txt").write_text("1 2 3 4 5 6 7 8\n")
    start = time.perf_counter()
    out = cli(project, "submit", "review.py:review", "--input", "data=data.txt").stdout
    candidate = re.search(r"^candidate (c-[0-9a-f]+)$", out, re.M).group(1)
    cli(project, "evidence", candidate)  # sealed: its bundle's citations are protected too
    fill(project, artifacts)
    info = {"project": str(project), "candidate": candidate, "artifacts": artifacts,
            "built_s": round(time.perf_counter() - start, 1)}
    ready.write_text(json.dumps(info, indent=1))
    return info


def _cpu_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="best of 3")
    parser.add_argument("--artifacts", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=None)
    Goals.add_argument(parser)
    args = parser.parse_args()
    goals = Goals.from_args(args)
    repeat = args.repeat or (3 if args.quick else 7)
    info = build(args.artifacts)
    project = Path(info["project"])
    print(f"store of {args.artifacts:,} filler artifacts: {project} (built in "
          f"{info['built_s']} s)", flush=True)
    commands = {"mlpipe --version": ("--version",),
                "mlpipe gc --dry-run": ("gc", "--dry-run"),
                "mlpipe gc --dry-run --older-than 30": ("gc", "--dry-run", "--older-than", "30")}
    found = {name: json.loads(cli(project, *a, "--format", "json").stdout)
             for name, a in commands.items() if name != "mlpipe --version"}
    everything = found["mlpipe gc --dry-run"]
    runs = args.artifacts // STEPS_PER_RUN
    protected_runs = len(range(0, runs, CANDIDATE_EVERY))
    # every filler artifact but the protected candidates' is listed; the real run's are kept
    assert len(everything["artifacts"]) == args.artifacts - protected_runs * STEPS_PER_RUN, \
        len(everything["artifacts"])
    best = {name: (float("inf"), float("inf")) for name in commands}
    for _ in range(repeat):
        for name, a in commands.items():
            cpu = _cpu_children()
            t0 = time.perf_counter()
            cli(project, *a)
            wall = time.perf_counter() - t0
            cpu = _cpu_children() - cpu
            best[name] = (min(best[name][0], wall), min(best[name][1], cpu))
    floor = best["mlpipe --version"]
    print(f"\n| command ({args.artifacts:,} artifacts) | wall | x `mlpipe --version` | CPU |")
    print("|---|---:|---:|---:|")
    for name, (wall, cpu) in best.items():
        print(f"| `{name}` | {wall:.3f} s | {wall / floor[0]:.2f}x | {cpu:.3f} s |")
    print(f"(best of {repeat}; would remove {len(everything['artifacts']):,} artifacts, "
          f"{len(found['mlpipe gc --dry-run --older-than 30']['artifacts']):,} with "
          f"--older-than 30; cpu count {os.cpu_count()}, load average "
          f"{os.getloadavg()[0]:.2f})")
    for name in list(commands)[1:]:
        wall, cpu = best[name]
        goals.check(f"`{name}`, {args.artifacts:,} artifacts", wall, "<=", GOAL_S, unit="s",
                    detail=f"CPU {cpu:.3f} s; {wall / floor[0]:.2f}x `mlpipe --version` "
                           f"({floor[0]:.3f} s)")
    goals.save()


if __name__ == "__main__":
    main()
