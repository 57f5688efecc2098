"""A local step's MLflow run: a failure to open or close it never fails the step, and is said."""
from __future__ import annotations

import pytest

from mlpipe.backends.local import mlflowruns

pytest.importorskip("mlflow")


def test_close_run_that_mlflow_cannot_reach_is_a_warning(monkeypatch, tmp_path, capsys):
    # A file store with no such run: MlflowClient.set_terminated raises (what an unreachable or
    # reset tracking server does); the step's outcome stands and the warning names the run.
    monkeypatch.setenv("MLFLOW_TRACKING_URI", (tmp_path / "mlruns").as_uri())
    mlflowruns.close_run("0123456789abcdef0123456789abcdef", ok=True)
    err = capsys.readouterr().err
    assert err.startswith("mlpipe: warning: MLflow run 0123456789abcdef0123456789abcdef not marked "
                          "FINISHED: ")


def test_close_run_without_a_run_says_nothing(capsys):
    mlflowruns.close_run(None, ok=False)
    assert capsys.readouterr().err == ""
