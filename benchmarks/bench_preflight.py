"""Pre-flight cost: what the workspace pre-flight adds to ``mlpipe submit --target azure`` of
a 100-step pipeline against the loopback Azure ML service, and the requests it makes.

One run measures, with the real ``MLClientService`` and ``azure.ai.ml.MLClient`` (the loopback
service in a process of its own), ``run_preflight`` of a 100-step chain on two clusters, one
environment pinned and one ``@latest``, a registered data input at ``@latest`` and a serverless
step (so every kind of lookup is made), then ``submit_to_azure`` of the same pipeline with the
pre-flight's result, as the command runs them. The request count is the service's own log.
Goal: the pre-flight adds at most 1 s; its requests do not grow with the steps.
Usage:
    .venv/bin/python benchmarks/bench_preflight.py [--quick]
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
from mlpipe import Compute, Environment, Input, Output, component


@component(environment=Environment("defect-cpu", version="4"), compute=Compute("cpu-cluster"))
def load(raw: Input["uri_folder"], out: Output["uri_folder"]):
    pass


@component(environment=Environment("defect-cpu"), compute=Compute("cpu-cluster"))
def transform(data: Input["uri_folder"], out: Output["uri_folder"]):
    pass


@component(environment=Environment("defect-gpu", version="7"),
           compute=Compute("gpu-cluster", sku="Standard_NC24rs_v3"))
def fit(data: Input["uri_folder"], out: Output["uri_folder"]):
    pass


@component(environment=Environment("defect-cpu", version="4"),
           compute=Compute(sku="Standard_DS3_v2"))
def report(data: Input["uri_folder"], out: Output["uri_folder"]):
    pass
'''

PIPELINE = '''
from pfsteps import fit, load, report, transform

from mlpipe import pipeline


@pipeline(name="bench-preflight-{n}")
def chain(raw):
    data = load(raw=raw).out
    for i in range({n} - 2):
        data = (transform(data=data) if i % 2 else fit(data=data)).out
    return {{"out": report(data=data).out}}
'''


def main(n: int, goals: Goals) -> None:
    logging.getLogger("azure").setLevel(logging.CRITICAL)
    warnings.filterwarnings("ignore")
    server = subprocess.Popen([sys.executable, "-m", "loopback.azureml"], cwd=ROOT,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    loopback = json.loads(server.stdout.readline())
    os.environ.update(loopback["environ"])
    try:
        with tempfile.TemporaryDirectory(prefix="mlpipe-bench-preflight-") as tmp:
            folder = Path(tmp)
            (folder / "pfsteps.py").write_text(textwrap.dedent(COMPONENTS))
            (folder / f"pfflow{n}.py").write_text(textwrap.dedent(PIPELINE.format(n=n)))
            sys.path.insert(0, str(folder))
            row = measure(n, folder, loopback)
    finally:
        server.stdin.close()
        stats = json.loads(server.stdout.readline())
        server.wait(timeout=60)
    print("| steps | pre-flight | its requests | submit after it | pre-flight's share |")
    print("|---:|---:|---:|---:|---:|")
    print(f"| {n} | {row['preflight_s']:.2f} s | {row['requests']} | {row['submit_s']:.2f} s | "
          f"{row['preflight_s'] / (row['preflight_s'] + row['submit_s']):.0%} |")
    print(f"findings: {row['codes']}; loopback (whole run): {stats['requests']} requests, "
          f"{stats['by_kind']}")
    goals.check(f"pre-flight of {n} steps adds at most 1 s to submit --target azure",
                row["preflight_s"], "<=", 1.0, unit="s",
                detail=f"{row['requests']} requests; the submit itself {row['submit_s']:.2f} s")
    goals.check(f"pre-flight requests for {n} steps", row["requests"], "<=", 12,
                unit="requests", detail="one per distinct name, not per step")
    goals.save()


def measure(n: int, folder: Path, loopback: dict) -> dict:
    from loopback.azureml.credential import StaticTokenCredential
    from mlpipe.backends.azure.preflight import run_preflight
    from mlpipe.backends.azure.service import MLClientService
    from mlpipe.backends.azure.submit import submit_to_azure
    from mlpipe.backends.azure.workspace import Workspace
    from mlpipe.evidence.storage.store import Store
    from mlpipe.loader import load_spec

    spec, _ = load_spec(str(folder / f"pfflow{n}.py"))
    ws = Workspace(*loopback["workspace"])
    inputs = {"raw": "azureml:defect-images@latest"}
    service = MLClientService(ws, credential=StaticTokenCredential())
    service.check_access()  # the client warm, as the command's is when the pre-flight starts
    start = time.perf_counter()
    result = run_preflight(spec, ws, service.client, inputs=inputs)
    preflight_s = time.perf_counter() - start
    store = Store.open(f"sqlite:///{folder / 'store.sqlite'}")
    try:
        start = time.perf_counter()
        errors = [d for d in result.diagnostics if d.severity.value == "error"]
        assert not errors, [d.message for d in errors][:3]
        run = submit_to_azure(spec, ws, service, store=store, inputs=inputs,
                              extra_diagnostics=result.diagnostics, preflight=result)
        submit_s = time.perf_counter() - start
    finally:
        store.close()
    assert run.job_name
    return {"preflight_s": preflight_s, "submit_s": submit_s, "requests": result.requests,
            "codes": sorted({d.code for d in result.diagnostics})}


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the same, 100 steps (the default)")
    parser.add_argument("--steps", type=int, default=100)
    Goals.add_argument(parser)
    args = parser.parse_args()
    main(args.steps, Goals.from_args(args))
