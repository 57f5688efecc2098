"""Benchmarks of the local executor and the evidence store (issue 4), as ratios.

Run: ``.venv/bin/python benchmarks/bench_local.py [--quick] [--repeat N]``. Each figure is
printed with the baseline measured in the same run, both as the best of ``--repeat`` runs;
docs/performance.md records one run's output.
"""
from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from goals import Goals

STEPS = '''
from pathlib import Path
from mlpipe import Input, Output, component, pipeline

@component
def noop(src: Input["uri_file"], out: Output["uri_file"]):
    Path(out).write_text(Path(src).read_text())

def chain(n):
    @pipeline(name=f"chain{n}")
    def p(src):
        x = src
        for _ in range(n):
            x = noop(src=x).out
        return {"last": x}
    return p

chain50 = chain(50)
chain100 = chain(100)
'''


def _project(root: Path):
    root.mkdir(parents=True, exist_ok=True)
    (root / "benchsteps.py").write_text(STEPS)
    (root / "seed.txt").write_text("x")
    os.chdir(root)
    sys.path.insert(0, str(root))
    import benchsteps
    return benchsteps


def _compiled() -> None:
    """Compile mlpipe's modules to bytecode first, as installing the runtime does (pip and uv
    byte-compile a wheel): with PYTHONDONTWRITEBYTECODE set and no bytecode in the checkout,
    the fork server and every fresh interpreter would compile mlpipe from its source on each
    run (about 1 ms a step of the 50-step chain), which no installed step environment pays."""
    import compileall

    compileall.compile_dir(Path(__file__).resolve().parents[1] / "mlpipe", quiet=1)


def _clean_interpreter(root: Path) -> str:
    """A virtual environment of this Python with nothing installed (no pip either): its
    ``python -c pass`` is a bare interpreter's start. This benchmark's own interpreter is not
    bare: a checkout's editable install (``pip install -e .``, what ``make`` does) puts
    setuptools' import finder in a ``.pth`` file that every start runs (more than half of its
    ``python -c pass`` on the 2-core machine of docs/performance.md), which an installed
    wheel, what a user and a step environment have, does not."""
    import venv

    where = root.parent / "bare-venv"
    venv.EnvBuilder(with_pip=False, symlinks=True, clear=True).create(where)
    return str(where / "bin" / "python")


def _split_cpu() -> tuple[float, float]:
    """CPU seconds of this process, and of the children it has reaped."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(
        resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime


def bench_executor(root: Path, repeat: int, goals: Goals) -> None:
    from mlpipe.backends.local.executor import LocalExecutor
    from mlpipe.checks import check_pipeline

    _compiled()
    bare_python = _clean_interpreter(root)
    mod = _project(root)

    def processes(code: str, python: str = sys.executable) -> None:
        for _ in range(50):
            subprocess.run([python, "-c", code], check=True)

    graph, _ = check_pipeline(mod.chain50.spec)
    forked = LocalExecutor(max_parallel=1, reuse=False, stream=None)
    fresh = LocalExecutor(max_parallel=1, reuse=False, stream=None, fork_server=False)
    forked.submit(graph, inputs={"src": "seed.txt"}, params={})  # warm: store, schema
    split: list[tuple[float, float]] = []  # (executor, its children) of each forked run

    def forked_run() -> None:
        before = _split_cpu()
        forked.submit(graph, inputs={"src": "seed.txt"}, params={})
        after = _split_cpu()
        split.append((after[0] - before[0], after[1] - before[1]))

    timed = _alternated_cpu({  # taking turns, so that load on the machine hits all alike
        "bare": lambda: processes("pass"),
        "forked": forked_run,
        "clean": lambda: processes("pass", bare_python),
        "import": lambda: processes("import mlpipe"),
        "fresh": lambda: fresh.submit(graph, inputs={"src": "seed.txt"}, params={}),
    }, repeat)
    best = {name: wall for name, (wall, _cpu_s) in timed.items()}
    cpu = {name: cpu_s / 50 for name, (_wall, cpu_s) in timed.items()}
    bare, with_import = best["bare"] / 50, best["import"] / 50
    per_step, per_fresh = best["forked"] / 50, best["fresh"] / 50
    own, kids = min(split, key=sum)
    print(f"executor, 50-step chain (no reuse), steps forked from the fork server: "
          f"{per_step * 1000:.1f} ms a step (CPU {cpu['forked'] * 1000:.1f} ms, every process "
          f"of the run: the executor {own / 50 * 1000:.1f} ms, the fork server, its steps and "
          f"the reaper {kids / 50 * 1000:.1f} ms); `python -c pass` {bare * 1000:.1f} ms (CPU "
          f"{cpu['bare'] * 1000:.1f} ms) -> {per_step / bare:.2f}x wall, "
          f"{cpu['forked'] / cpu['bare']:.2f}x CPU (goal < 1.5x and < 30 ms)")
    print(f"  a bare interpreter's start (a venv with nothing installed): CPU "
          f"{cpu['clean'] * 1000:.1f} ms -> {cpu['forked'] / cpu['clean']:.2f}x; this "
          f"interpreter's start is {cpu['bare'] / cpu['clean']:.2f}x it")
    # judged on CPU time: on a machine shared with other jobs the wall time measures them
    goals.check("executor, a step of a 50-step chain", cpu["forked"] / cpu["bare"], "<=", 1.5,
                unit="x `python -c pass` (CPU)",
                detail=f"wall {per_step * 1000:.1f} ms a step, {per_step / bare:.2f}x")
    goals.check("executor, a step of a 50-step chain", cpu["forked"] * 1000, "<=", 30,
                unit="ms CPU", detail=f"wall {per_step * 1000:.1f} ms")
    # issue 36: the runtime's cost to a step, against this interpreter's start as the issue
    # measured it, and against a bare one (docs/performance.md says which holds)
    goals.check("the runtime's cost to a step (issue 36)", cpu["forked"] / cpu["bare"], "<=",
                0.5, unit="x `python -c pass` of this venv (CPU)",
                detail=f"{cpu['forked'] / cpu['clean']:.2f}x a bare interpreter's start")
    print(f"executor, 50-step chain (no reuse), every step a fresh interpreter "
          f"(MLPIPE_FORKSERVER=0): {per_fresh * 1000:.1f} ms a step -> {per_fresh / bare:.2f}x "
          f"the bare interpreter; `python -c 'import mlpipe'` {with_import * 1000:.1f} ms -> "
          f"{per_fresh / with_import:.2f}x")
    graph100, _ = check_pipeline(mod.chain100.spec)
    reuse = LocalExecutor(max_parallel=1, stream=None)
    reuse.submit(graph100, inputs={"src": "seed.txt"}, params={})
    time.sleep(2.1)  # let the stat cache treat the new artifacts as settled
    reuse.submit(graph100, inputs={"src": "seed.txt"}, params={})
    results = []
    took, took_cpu = _alternated_cpu({"reused": lambda: results.append(
        reuse.submit(graph100, inputs={"src": "seed.txt"}, params={}))}, repeat)["reused"]
    assert all(set(r.steps.values()) == {"reused"} for r in results)
    print(f"fully reused re-run, 100 steps: {took:.3f} s of executor time, CPU {took_cpu:.3f} s "
          f"(goal < 1 s: {took_cpu:.2f}x the goal)")
    goals.check("fully reused re-run, 100 steps", took_cpu, "<=", 1.0, unit="s CPU",
                detail=f"wall {took:.3f} s")


def _read_all(paths: list[str]) -> int:
    n = 0
    for p in paths:
        with open(p, "rb") as fh:
            while chunk := fh.read(8 << 20):
                n += len(chunk)
    return n


def _os_read(paths: list[str]) -> None:
    """The honest floor of reading many small files in Python: no file objects, no walk."""
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        while os.read(fd, 1 << 16):
            pass
        os.close(fd)


def _cpu() -> float:
    """CPU seconds of this process and of every child it has reaped (the fork server and,
    through it, the steps it forked)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(
        resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _alternated_cpu(fns: dict, repeat: int) -> dict[str, tuple[float, float]]:
    """The best wall and the best CPU time of each function, taking turns."""
    best = {name: (float("inf"), float("inf")) for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            c, t = _cpu(), time.perf_counter()
            fn()
            wall, cpu = time.perf_counter() - t, _cpu() - c
            best[name] = (min(best[name][0], wall), min(best[name][1], cpu))
    return best


def _alternated(fns: dict, repeat: int) -> dict[str, float]:
    """The best time of each function, the functions taking turns (load hits all alike)."""
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(repeat):
        for name, fn in fns.items():
            t = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - t)
    return best


def bench_snapshot(root: Path, big_mib: int, small: int, repeat: int, goals: Goals) -> None:
    import blake3

    from mlpipe.digests.snapshot import StatCache, snapshot

    root.mkdir(parents=True, exist_ok=True)
    big = root / "big.bin"
    with open(big, "wb") as fh:
        block = os.urandom(1 << 20)
        for _ in range(big_mib):
            fh.write(block)
    folder = root / "small"
    folder.mkdir()
    for i in range(small):
        sub = folder / f"d{i // 1000:02d}"
        sub.mkdir(exist_ok=True)
        (sub / f"f{i:05d}.bin").write_bytes(os.urandom(4096))
    files = sorted(str(p) for p in folder.rglob("*.bin"))
    time.sleep(2.1)
    _read_all([str(big)])  # warm the page cache
    data = os.urandom(256 << 20)
    best = _alternated({
        "read": lambda: _read_all([str(big)]),
        "snapshot": lambda: snapshot(big),
        "bound": lambda: blake3.blake3(data, max_threads=blake3.blake3.AUTO).digest(),
    }, repeat)
    one = _alternated({"one core": lambda: blake3.blake3(data).digest()}, repeat)["one core"]
    gb = big_mib * (1 << 20) / 1e9
    bound = len(data) / best["bound"] / 1e9
    print(f"snapshot of a {big_mib} MiB file: {gb / best['snapshot']:.2f} GB/s; plain read "
          f"{gb / best['read']:.2f} GB/s -> {best['read'] / best['snapshot']:.2f}x the read "
          f"(the bound here: {bound / (gb / best['read']):.2f}x)")
    print(f"  the bound: BLAKE3 of 256 MiB already in memory: {len(data) / one / 1e9:.2f} GB/s "
          f"on one core, {bound:.2f} GB/s on all {os.cpu_count()}")
    goals.check(f"snapshot of a {big_mib} MiB file, against BLAKE3's bound (all cores, data "
                f"in memory)", gb / best["snapshot"] / bound, ">=", 0.85, unit="x the bound",
                detail=f"{gb / best['snapshot']:.2f} GB/s; {best['read'] / best['snapshot']:.2f}x "
                       f"a plain read")
    _os_read(files)
    caches = iter([StatCache(root / f"cold{i}.sqlite") for i in range(repeat)])
    best = _alternated({
        "os.read loop": lambda: _os_read(files),
        "no cache": lambda: snapshot(folder),
        "cold cache": lambda: snapshot(folder, next(caches)),  # empty each time: every file read
        "file objects": lambda: _read_all(files),
    }, repeat)
    for name in ("no cache", "cold cache"):
        print(f"snapshot of {small:,} files of 4 KiB, {name}: {small / best[name]:,.0f} files/s; "
              f"an os.read loop {small / best['os.read loop']:,.0f} files/s -> "
              f"{best['os.read loop'] / best[name]:.2f}x (file objects with an 8 MiB buffer: "
              f"{small / best['file objects']:,.0f} files/s)")
    goals.check(f"snapshot of {small:,} files of 4 KiB (no stat cache: outputs, --verify)",
                best["os.read loop"] / best["no cache"], ">=", 0.5, unit="x an os.read loop",
                detail=f"{small / best['no cache']:,.0f} files/s")
    goals.check(f"snapshot of {small:,} files of 4 KiB (an empty stat cache: a first run's "
                f"inputs)", best["os.read loop"] / best["cold cache"], ">=", 0.5,
                unit="x an os.read loop", detail=f"{small / best['cold cache']:,.0f} files/s")
    cache = StatCache(root / "cache.sqlite")
    snapshot(folder, cache)
    cache.close()

    def stat_walk() -> None:
        for dirpath, _dirs, names in os.walk(folder):
            for name in names:
                os.stat(os.path.join(dirpath, name))

    warm = StatCache(root / "cache.sqlite")
    best = _alternated({"walk": stat_walk, "again": lambda: snapshot(folder, warm)}, repeat)
    print(f"unchanged re-snapshot with the stat cache: {small / best['again']:,.0f} files/s; "
          f"stat-only walk {small / best['walk']:,.0f} files/s -> "
          f"{best['walk'] / best['again']:.2f}x the walk")
    goals.check(f"unchanged re-snapshot of {small:,} files (stat cache)",
                best["walk"] / best["again"], ">=", 0.8, unit="x a stat-only walk")


def bench_queries(root: Path, n_steps: int, goals: Goals) -> None:
    from sqlalchemy import insert

    from mlpipe.evidence.records.queries import (
        candidate_story,
        candidates_on_snapshot,
        pipeline_runs,
        runs_reusing,
    )
    from mlpipe.evidence.storage import models as m
    from mlpipe.evidence.storage.store import Store, utcnow

    store = Store.open(f"sqlite:///{root / 'q.sqlite'}")
    per_run = 10
    n_runs = n_steps // per_run
    now = utcnow()
    with store.session() as s:
        s.execute(insert(m.PipelineSpecRow), [{"digest": f"sha256:p{i}", "name": f"pipe{i}",
                                               "spec": {}} for i in range(20)])
        s.execute(insert(m.ComponentVersion), [{"id": 1, "name": "c", "version": "1",
                                                "spec_digest": "sha256:c",
                                                "code_digest": "sha256:k", "spec": {}}])
        s.execute(insert(m.Snapshot), [{"id": i, "digest": f"blake3:{i}", "size": 1,
                                        "file_count": 1, "reference": "/d", "mutable": True}
                                       for i in range(1, 501)])
        s.execute(insert(m.Artifact), [{"id": i, "digest": f"blake3:a{i}", "kind": "uri_file",
                                        "size": 1, "file_count": 1, "location": "/x"}
                                       for i in range(1, n_runs + 1)])
        s.execute(insert(m.Run), [{"id": f"r-{i:08d}", "pipeline_name": f"pipe{i % 20}",
                                   "pipeline_digest": f"sha256:p{i % 20}", "target": "local",
                                   "params": {"i": i}, "status": "succeeded",
                                   "started_at": now, "options": {}} for i in range(n_runs)])
        s.execute(insert(m.RunInput), [{"run_id": f"r-{i:08d}", "name": "raw",
                                        "snapshot_id": i % 500 + 1} for i in range(n_runs)])
        s.execute(insert(m.StepRun), [{
            "id": f"s-{i:08d}", "run_id": f"r-{i // per_run:08d}", "step": f"st{i % per_run}",
            "component_version_id": 1, "compute": {}, "topology": {},
            "cache_key": f"sha256:{i % 5000}", "key_material": {}, "cacheable": True,
            "status": "reused" if i >= 5000 else "executed",
            "reused_from_id": f"s-{i % 5000:08d}" if i >= 5000 else None,
            "started_at": now} for i in range(n_steps)])
        s.execute(insert(m.StepArtifact), [{"step_run_id": f"s-{i:08d}", "direction": "output",
                                            "port": "out", "artifact_id": i // per_run + 1}
                                           for i in range(0, n_steps, per_run)])
        s.execute(insert(m.CandidateRow), [{"id": f"c-{i:08d}", "run_id": f"r-{i:08d}",
                                            "model_artifact_id": i + 1, "created_at": now}
                                           for i in range(n_runs)])
    queries = {
        "everything about candidate X": lambda s: candidate_story(s, f"c-{n_runs // 2:08d}"),
        "runs that reused step run Y": lambda s: runs_reusing(s, "s-00001234"),
        "candidates trained on snapshot Z": lambda s: candidates_on_snapshot(s, "blake3:77"),
        "runs of a pipeline, newest first (50)": lambda s: pipeline_runs(s, "pipe7"),
    }
    for name, q in queries.items():
        best = float("inf")
        for _ in range(5):
            with store.session() as s:
                t = time.perf_counter()
                q(s)
                best = min(best, time.perf_counter() - t)
        print(f"query at {n_steps:,} step runs, {name}: {best * 1000:.1f} ms "
              f"(goal < 50 ms: {best / 0.05:.2f}x the goal)")
        goals.check(f"query at {n_steps:,} step runs: {name}", best * 1000, "<=", 50,
                    unit="ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true",
                        help="a 256 MiB file and 10,000 step runs (every goal still checked)")
    parser.add_argument("--repeat", type=int, default=3, help="best of this many runs")
    Goals.add_argument(parser)
    args = parser.parse_args()
    goals = Goals.from_args(args)
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        os.environ["MLPIPE_HOME"] = str(tmp_path / "proj" / "evidence")
        os.environ.pop("MLPIPE_STORE_URL", None)
        bench_queries(tmp_path, 10_000 if args.quick else 100_000, goals)
        bench_snapshot(tmp_path / "snap", 256 if args.quick else 1024, 10_000,
                       args.repeat if not args.quick else max(args.repeat, 5), goals)
        bench_executor(tmp_path / "proj", args.repeat, goals)
    goals.save()


if __name__ == "__main__":
    main()
