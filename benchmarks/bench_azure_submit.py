"""Submit speed: ``mlpipe submit --target azure`` of an N-step pipeline against the loopback
Azure ML service, the wall time split into mlpipe's own work and azure-ai-ml's.

For N in 100 and 1,000 steps (a chain over three components with a parameter each, in a
project folder of its own so that the code upload is small), one run each measures:
  - total: ``submit_to_azure`` with an evidence store, as the command runs it;
  - azure-ai-ml, offline: loading and validating the exported YAML (``load_job``);
  - azure-ai-ml + HTTP: ``MLClient`` construction, the access check and
    ``jobs.create_or_update`` (code hashing and upload, component registration, job creation);
  - mlpipe: the rest (checks, export, recording the run and its 3N-row plan).
The loopback service runs in its own process (``python -m loopback.azureml``); its answering
time and request counts are reported beside. Usage:
    .venv/bin/python benchmarks/bench_azure_submit.py [N ...]
"""
from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import tempfile
import textwrap
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from goals import Goals  # noqa: E402

COMPONENTS = '''
from mlpipe import Compute, Environment, Input, Output, Param, component

ENV = Environment("defect-cpu", version="4")


@component(environment=ENV, compute=Compute("cpu-cluster"))
def load(raw: Input["uri_folder"], out: Output["uri_folder"], rows: Param[int, 1:100] = 5):
    pass


@component(environment=ENV, compute=Compute("cpu-cluster"))
def transform(data: Input["uri_folder"], out: Output["uri_folder"], scale: Param[float] = 1.0):
    pass


@component(environment=ENV, compute=Compute("gpu-cluster"))
def fit(data: Input["uri_folder"], out: Output["uri_folder"], epochs: Param[int, 1:200] = 3):
    pass
'''

PIPELINE = '''
from benchsteps import fit, load, transform

from mlpipe import pipeline


@pipeline(name="bench-chain-{n}")
def chain(raw):
    data = load(raw=raw).out
    for i in range({n} - 1):
        step = transform(data=data) if i % 2 else fit(data=data, epochs=1 + i % 7)
        data = step.out
    return {{"out": data}}
'''


class Timed:
    """Wraps a service method and adds its wall time to a bucket."""

    def __init__(self, fn, bucket: dict, key: str) -> None:
        self.fn, self.bucket, self.key = fn, bucket, key

    def __call__(self, *args, **kwargs):
        start = time.perf_counter()
        try:
            return self.fn(*args, **kwargs)
        finally:
            self.bucket[self.key] = self.bucket.get(self.key, 0.0) + time.perf_counter() - start


def measure(n: int, folder: Path, loopback: dict) -> dict:
    from loopback.azureml.credential import StaticTokenCredential
    from mlpipe.backends.azure import submit as submit_module
    from mlpipe.backends.azure.service import MLClientService
    from mlpipe.backends.azure.submit import submit_to_azure
    from mlpipe.backends.azure.workspace import Workspace
    from mlpipe.evidence.storage.store import Store
    from mlpipe.loader import load_spec

    (folder / f"benchflow{n}.py").write_text(textwrap.dedent(PIPELINE.format(n=n)))
    spec, _ = load_spec(str(folder / f"benchflow{n}.py"))
    ws = Workspace(*loopback["workspace"])
    store = Store.open(f"sqlite:///{folder / f'store{n}.sqlite'}")
    parts: dict[str, float] = {}
    real_load = submit_module.load_export
    submit_module.load_export = Timed(real_load, parts, "azure_ai_ml_offline")
    try:
        start = time.perf_counter()
        service = Timed(MLClientService, parts, "azure_ai_ml_http")(
            ws, credential=StaticTokenCredential())
        service.check_access = Timed(service.check_access, parts, "azure_ai_ml_http")
        service.create = Timed(service.create, parts, "azure_ai_ml_http")
        run = submit_to_azure(spec, ws, service, store=store,
                              inputs={"raw": "azureml:defect-images:1"})
        total = time.perf_counter() - start
    finally:
        submit_module.load_export = real_load
        store.close()
    assert run.job_name
    mlpipe_own = total - parts["azure_ai_ml_offline"] - parts["azure_ai_ml_http"]
    return {"n": n, "total_s": total, "mlpipe_s": mlpipe_own, **parts}


def main(sizes: list[int], goals: Goals) -> None:
    logging.getLogger("azure").setLevel(logging.CRITICAL)
    warnings.filterwarnings("ignore")
    server = subprocess.Popen([sys.executable, "-m", "loopback.azureml"], cwd=ROOT,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    loopback = json.loads(server.stdout.readline())
    os.environ.update(loopback["environ"])
    rows = []
    try:
        with tempfile.TemporaryDirectory(prefix="mlpipe-bench-submit-") as tmp:
            folder = Path(tmp)
            (folder / "benchsteps.py").write_text(textwrap.dedent(COMPONENTS))
            sys.path.insert(0, str(folder))
            for n in sizes:
                rows.append(measure(n, folder, loopback))
                print(f"n={n}: {rows[-1]}", file=sys.stderr, flush=True)
    finally:
        server.stdin.close()
        stats = json.loads(server.stdout.readline())
        server.wait(timeout=60)
    print("| steps | total | mlpipe's own work | azure-ai-ml offline (load, validate) | "
          "azure-ai-ml + HTTP (create_or_update) | mlpipe's share |")
    print("|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['n']:,} | {r['total_s']:.2f} s | {r['mlpipe_s']:.2f} s | "
              f"{r['azure_ai_ml_offline']:.2f} s | {r['azure_ai_ml_http']:.2f} s | "
              f"{r['mlpipe_s'] / r['total_s']:.0%} |")
    print(f"\nloopback service (all sizes): {stats['requests']} requests, "
          f"{stats['answering_s']:.2f} s answering; {stats['by_kind']}")
    for r in rows:
        # "mlpipe's share small", read as at most a tenth of the submission
        goals.check(f"mlpipe's own share of submitting {r['n']:,} steps",
                    r["mlpipe_s"] / r["total_s"], "<=", 0.10, unit="of the wall time",
                    detail=f"{r['mlpipe_s']:.2f} s of {r['total_s']:.2f} s")
    goals.save()


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sizes", type=int, nargs="*")
    parser.add_argument("--quick", action="store_true", help="30 steps only")
    Goals.add_argument(parser)
    args = parser.parse_args()
    main(args.sizes or ([30] if args.quick else [100, 1000]), Goals.from_args(args))
