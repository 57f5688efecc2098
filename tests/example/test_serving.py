"""The example's MLflow model is one MLflow serves: the model the example's train step writes,
served by the real `mlflow models serve` (the scoring server, this environment:
``--env-manager local``) as its own process, answers a prediction over HTTP with what
``mlflow.pyfunc`` computes in-process."""
from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from components.defect import prepare, train
from components.synthetic import make_dataset

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _post(url: str, body: dict) -> tuple[int, dict]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def test_mlflow_models_serve_answers_a_prediction_of_the_example_model(tmp_path):
    import mlflow.pyfunc
    import numpy as np

    raw, split = make_dataset(tmp_path / "data", per_class=20, seed=5)
    examples, labels = tmp_path / "examples", tmp_path / "labels.json"
    prepare.fn(raw=raw, split=split, examples=examples, labels=labels)
    model = tmp_path / "model"
    with pytest.warns(RuntimeWarning, match=r"outside an mlpipe step"):
        train.fn(examples=examples, labels=labels, model=model, epochs=3)
    rows = np.random.default_rng(0).random((3, 64)).round(4).tolist()
    expected = mlflow.pyfunc.load_model(str(model)).predict(np.asarray(rows))

    port = _free_port()
    # mlflow starts `uvicorn` from PATH: this environment's, as an activated one has it
    env = {**os.environ, "MLFLOW_TRACKING_URI": f"file://{tmp_path / 'mlruns'}",
           "PATH": os.pathsep.join([os.path.dirname(sys.executable), os.environ["PATH"]])}
    server = subprocess.Popen(
        [sys.executable, "-m", "mlflow", "models", "serve", "-m", str(model),
         "--env-manager", "local", "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            assert server.poll() is None, f"mlflow models serve exited: {server.stdout.read()}"
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/ping", timeout=2) as ping:
                    if ping.status == 200:
                        break
            except (urllib.error.URLError, OSError):
                pass
            assert time.monotonic() < deadline, "the scoring server did not answer /ping in 120 s"
            time.sleep(0.5)
        status, answer = _post(f"http://127.0.0.1:{port}/invocations", {"inputs": rows})
        assert status == 200, answer
        served = np.asarray(answer["predictions"], dtype="float64")
        assert served.shape == (3, len(json.loads(labels.read_text())))
        assert np.allclose(served, expected) and np.allclose(served.sum(axis=1), 1.0)
        # a request the model cannot take is the server's 400, not a crash
        status, answer = _post(f"http://127.0.0.1:{port}/invocations", {"nothing": []})
        assert status == 400 and answer.get("error_code") == "BAD_REQUEST", answer
        assert server.poll() is None   # it serves on
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, 15)
        server.communicate(timeout=30)
