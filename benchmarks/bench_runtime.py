"""Benchmark: what the step runtime costs a step body, against the same work without it.

Three measurements, each as a ratio against its baseline measured in the same run:

- observation: a body that opens N files (half under its input, half elsewhere) with the
  audit-hook observer active vs the same opens with no observer;
- the record: ``log_metric`` into the rank's part of the step record (MLflow off) vs appending
  the same JSON line to a file (what mlpipe did before the record);
- the finisher: digesting an output folder for the record (SHA-256 and BLAKE3 of every file,
  both manifests) vs ``mlpipe.digests.snapshot`` of it (the local store's BLAKE3 alone), and
  a whole small step through ``mlpipe.runtime.step.execute`` vs calling its function.

Prints a Markdown table for docs/performance.md (best of --repeat runs).

    python benchmarks/bench_runtime.py [--files 2000] [--metrics 20000] [--repeat 5]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--metrics", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    from mlpipe.digests.snapshot import snapshot
    from mlpipe.runtime import observe, record
    from mlpipe.runtime.finish import content

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        data, other, out = root / "in", root / "other", root / "out"
        for folder in (data, other, out):
            folder.mkdir()
        paths = []
        for i in range(args.files):
            folder = data if i % 2 else other
            (folder / f"f{i}.txt").write_bytes(os.urandom(2048))
            paths.append(str(folder / f"f{i}.txt"))
            (out / f"o{i}.bin").write_bytes(os.urandom(8192))

        def opens() -> None:
            for p in paths:
                with open(p, "rb") as fh:
                    fh.read(16)

        plain_open = best(opens, args.repeat)
        observer = observe.Observer(observe.Filter({"data": str(data)}, {"out": str(out)},
                                                   scratch=[str(root / "record")]))

        def observed() -> None:
            observer.reads.clear()
            observer.start()
            try:
                opens()
            finally:
                observer.stop()

        watched = best(observed, args.repeat)

        os.environ[record.RECORD_DIR_ENV] = str(root / "record")
        os.environ.pop("MLFLOW_TRACKING_URI", None)
        from mlpipe.runtime import log_metric

        def metrics() -> None:
            record.reset()
            for i in range(args.metrics):
                log_metric("loss", 1.0 / (i + 1), scope="partial")
            record.reset()

        def lines() -> None:
            with open(root / "metrics.jsonl", "w") as fh:
                for i in range(args.metrics):
                    fh.write(json.dumps({"name": "loss", "value": 1.0 / (i + 1),
                                         "scope": "partial", "rank": None,
                                         "population": None}) + "\n")

        with_record = best(metrics, args.repeat)
        with_lines = best(lines, args.repeat)
        digest_record = best(lambda: content(str(out)), args.repeat)
        digest_store = best(lambda: snapshot(out), args.repeat)

        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "fixtures"
                               / "runtime"))
        from record_steps import native_writer

        from mlpipe.runtime import step

        def through_runtime() -> None:
            target = root / "step-out"
            target.mkdir(exist_ok=True)
            step.execute({"function": "record_steps:native_writer", "sys_path": [],
                          "inputs": {}, "outputs": {"out": str(target)}, "params": {},
                          "record": str(root / "step-record")})

        def bare() -> None:
            target = root / "bare-out"
            target.mkdir(exist_ok=True)
            native_writer.fn(str(target))

        runtime = best(through_runtime, args.repeat)
        direct = best(bare, args.repeat)

    rows = [
        ("observation", f"{args.files} opens, observed", watched, "the same opens", plain_open),
        ("record", f"{args.metrics} log_metric calls", with_record,
         "the same JSON lines appended to a file", with_lines),
        ("finisher", f"digest {args.files} x 8 KiB output files (SHA-256 + BLAKE3)",
         digest_record, "snapshot (BLAKE3)", digest_store),
        ("step", "a small step through the runtime (record, validation, digests)", runtime,
         "its function called directly", direct),
    ]
    print("| part | measured | time | baseline | time | ratio |")
    print("|---|---|---|---|---|---|")
    for part, what, t, base, b in rows:
        print(f"| {part} | {what} | {t * 1000:.1f} ms | {base} | {b * 1000:.1f} ms | "
              f"{t / b:.2f}x |")


if __name__ == "__main__":
    main()
