"""`mlpipe check` on the example pipelines: this tree against a baseline commit, same run.

Two figures per pipeline: the checker alone (``check_pipeline`` on the loaded spec, in
process, best of 50), and the command a user runs (``mlpipe check FILE`` in a fresh
interpreter, best of 7, imports included). The baseline is the tree of a git commit
(``--baseline REF``, by default the commit before issue 11's checks) exported to a temporary
folder and run from there with the same interpreter, alternating with this tree so that load
on the machine hits both alike. Run: ``.venv/bin/python benchmarks/bench_check.py``.
Prints a Markdown table for docs/performance.md.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PIPELINES = ("pipelines/defect_classifier.py", "pipelines/defect_classifier_ddp.py")
#: main before issue 11's checks landed (the layers merge it was built on)
DEFAULT_BASELINE = "5607034"

IN_PROCESS = r"""
import sys, time
from mlpipe.checks import check_pipeline
from mlpipe.loader import load_spec
spec, _ = load_spec(sys.argv[1])
check_pipeline(spec)  # warm: parse caches, lazy imports
best = min((lambda t0: (check_pipeline(spec), time.perf_counter() - t0)[1])(time.perf_counter())
           for _ in range(int(sys.argv[2])))
print(best)
"""


def export_tree(ref: str, into: Path) -> Path:
    archive = into / "tree.tar"
    subprocess.run(["git", "-C", str(ROOT), "archive", "-o", str(archive), ref], check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(into / "tree", filter="data")
    return into / "tree"


def _env(tree: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(tree)
    env.pop("MLPIPE_HOME", None)
    return env


def in_process(tree: Path, pipeline: str, repeat: int) -> float:
    done = subprocess.run([sys.executable, "-c", IN_PROCESS, pipeline, str(repeat)], cwd=tree,
                          env=_env(tree), capture_output=True, text=True, check=True)
    return float(done.stdout.strip().splitlines()[-1])


def command(tree: Path, pipeline: str) -> float:
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "mlpipe.cli", "check", pipeline], cwd=tree,
                          env=_env(tree), capture_output=True, text=True)
    elapsed = time.perf_counter() - t0
    if done.returncode not in (0, 1):
        raise RuntimeError(f"mlpipe check {pipeline} in {tree} failed:\n{done.stderr}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--baseline", default=DEFAULT_BASELINE, help="git commit to compare")
    parser.add_argument("--runs", type=int, default=7, help="fresh-interpreter runs each")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-check-") as tmp:
        base = export_tree(args.baseline, Path(tmp))
        for pipeline in PIPELINES:
            ours_in = in_process(ROOT, pipeline, 50)
            base_in = in_process(base, pipeline, 50)
            ours_cmd, base_cmd = [], []
            for _ in range(args.runs):  # alternate, so load hits both alike
                ours_cmd.append(command(ROOT, pipeline))
                base_cmd.append(command(base, pipeline))
            rows.append((pipeline, ours_in, base_in, min(ours_cmd), min(base_cmd)))
            print(f"{pipeline}: checks {ours_in * 1e3:.2f} ms (baseline {base_in * 1e3:.2f} ms), "
                  f"mlpipe check {min(ours_cmd):.2f} s (baseline {min(base_cmd):.2f} s)",
                  file=sys.stderr)
    print(f"| pipeline | checks, this tree | checks, {args.baseline} | ratio | `mlpipe check`, "
          f"this tree | `mlpipe check`, {args.baseline} | ratio |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for pipeline, oi, bi, oc, bc in rows:
        print(f"| {pipeline} | {oi * 1e3:.2f} ms | {bi * 1e3:.2f} ms | {oi / bi:.2f}× "
              f"| {oc:.2f} s | {bc:.2f} s | {oc / bc:.2f}× |")


if __name__ == "__main__":
    main()
