"""Benchmark: what signing adds to `mlpipe evidence` and to `--verify` (docs/signing.md).

Three throw-away projects run the evidence-test pipeline once each (a real candidate): one that
signs nothing (`[signing] key = "none"`, the baseline), one sealed by this home's local key
(generated on first use: the bundle's DSSE envelope only) and one sealed by a configured key
with a trust policy (the envelope and the model's OpenSSF Model Signing signature). Each figure
is a whole process's CPU time (user + system), alternated with its unsigned twin in the same
run, median of the repeats:

1. the first `mlpipe evidence C` (build, seal, sign), the candidate's bundles and signatures
   deleted between repeats so that each one seals anew;
2. `mlpipe evidence C` of a sealed bundle (what a reviewer runs again and again);
3. `mlpipe evidence C --verify` against `--verify --trust trust.yml` (every signature checked).

The trust policy is parsed once per content and kept in the user's cache (docs/signing.md):
the first `--verify --trust` of each project parses it, the repeats read the cached parse, as a
reviewer's repeated checks against one policy do.

Goal: signing adds at most 50 ms to 1 (bundle signing), 2 and 3. The first seal with a model
signature (model-signing imported and run, once per candidate) is reported, not held to it.

Run: .venv/bin/python benchmarks/bench_signing.py [--quick] [--repeat 7]
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from goals import Goals


def _time(proj, *args: str) -> float:
    """The command's CPU time (user + system, the process and its children): on a machine
    shared with other jobs, wall time measures them too."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = proj.cli(*args)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert done.returncode == 0, done.stderr
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _unseal(proj) -> None:
    for table in ("bundle_signatures", "model_signatures", "bundles"):
        proj.sql(f"DELETE FROM {table}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="best of 5")
    Goals.add_argument(parser)
    args = parser.parse_args()
    goals = Goals.from_args(args)
    if args.quick:
        args.repeat = 5
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    from bundle_project import BundleProject

    from mlpipe.evidence.signatures import keys

    with tempfile.TemporaryDirectory() as tmp:
        projects = {}
        for name, config in (("unsigned", '[signing]\nkey = "none"\n'), ("local", ""),
                             ("configured", '[signing]\nkey = "ci.pem"\n')):
            proj = BundleProject(Path(tmp) / name)
            (proj.root / "mlpipe.toml").write_text(config)
            keys.generate(proj.root / "ci.pem")
            (proj.root / "trust.yml").write_text(
                "identities:\n  ci: {public_key: ci.pub, may: [seal]}\n")
            projects[name] = (proj, proj.submit())
        first: dict[str, list[float]] = {n: [] for n in projects}
        for _ in range(args.repeat):
            for name, (proj, cand) in projects.items():
                _unseal(proj)
                first[name].append(_time(proj, "evidence", cand))
        sealed: dict[str, list[float]] = {"unsigned": [], "configured": []}
        verify: dict[str, list[float]] = {"unsigned": [], "configured": []}
        for _ in range(args.repeat):
            for name in ("unsigned", "configured"):
                proj, cand = projects[name]
                sealed[name].append(_time(proj, "evidence", cand))
                extra = ("--trust", "trust.yml") if name == "configured" else ()
                verify[name].append(_time(proj, "evidence", cand, "--verify", *extra))
    med = {k: {n: statistics.median(v) for n, v in d.items()}
           for k, d in (("first", first), ("sealed", sealed), ("verify", verify))}
    base = med["first"]["unsigned"]
    print(f"first `mlpipe evidence C` (build + seal): unsigned {base:.3f} s, "
          f"local key (bundle envelope) {med['first']['local']:.3f} s, configured key "
          f"(envelope + model signature) {med['first']['configured']:.3f} s")
    print(f"`mlpipe evidence C`, sealed: unsigned {med['sealed']['unsigned']:.3f} s, signed "
          f"{med['sealed']['configured']:.3f} s")
    print(f"`--verify`: unsigned {med['verify']['unsigned']:.3f} s; signed with `--trust` "
          f"{med['verify']['configured']:.3f} s")
    print(f"(CPU seconds, median of {args.repeat}; cpu count {os.cpu_count()}, load average "
          f"{os.getloadavg()[0]:.2f})")
    for label, added in (
            ("signing adds to the first `mlpipe evidence C` (bundle envelope)",
             med["first"]["local"] - base),
            ("signing adds to `mlpipe evidence C` of a sealed bundle",
             med["sealed"]["configured"] - med["sealed"]["unsigned"]),
            ("`--verify --trust` adds to `--verify`",
             med["verify"]["configured"] - med["verify"]["unsigned"])):
        goals.check(label, added * 1000, "<=", 50, unit="ms",
                    detail=f"CPU, median of {args.repeat}, paired with the unsigned path")
    print(f"the first seal with a model signature adds "
          f"{(med['first']['configured'] - base) * 1000:.0f} ms (model-signing imported and run "
          f"once per candidate; no goal)")
    goals.save()


if __name__ == "__main__":
    main()
