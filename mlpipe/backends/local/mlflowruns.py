"""MLflow runs for local steps: when ``MLFLOW_TRACKING_URI`` is set, each executed step gets
its own MLflow run (named after the step, tagged with mlpipe's run, step and component), so a
team's MLflow UI shows local runs as it shows Azure ML jobs; the step's runtime logs into it.

mlflow is optional and imported only when a tracking URI is set; a failure here never fails
the step (the step runs without a run id and the runtime says what did not reach MLflow).
"""
from __future__ import annotations

import os
import sys
from typing import Any

from mlpipe.runtime import tracking


def open_run(*, experiment: str, name: str, tags: dict[str, str]) -> str | None:
    """Create the step's MLflow run; its id, or None when MLflow is off or unreachable."""
    if not tracking.active() or os.environ.get(tracking.RUN_ENV):
        return None
    try:
        from mlflow.tracking import MlflowClient

        client = MlflowClient()
        experiment = os.environ.get(tracking.EXPERIMENT_ENV) or experiment
        found = client.get_experiment_by_name(experiment)
        experiment_id = found.experiment_id if found else client.create_experiment(experiment)
        return client.create_run(experiment_id, run_name=name, tags=tags).info.run_id
    except Exception as exc:  # ImportError, connection errors, MlflowException
        _warn(f"no MLflow run for step {name!r}", exc)
        return None


def close_run(run_id: str | None, ok: bool) -> None:
    """End the step's MLflow run with the step's outcome."""
    if run_id is None:
        return
    try:
        from mlflow.tracking import MlflowClient

        MlflowClient().set_terminated(run_id, "FINISHED" if ok else "FAILED")
    except Exception as exc:  # the step's outcome stands; its MLflow run stays RUNNING there
        _warn(f"MLflow run {run_id} not marked {'FINISHED' if ok else 'FAILED'}", exc)


def _warn(what: str, exc: Exception) -> None:
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    print(f"mlpipe: warning: {what}: {type(exc).__name__}: {first}", file=sys.stderr)


def step_tags(*, run_id: str, step: str, component: Any) -> dict[str, str]:
    """The tags a local step's MLflow run carries."""
    return {"mlpipe.run_id": run_id, "mlpipe.step": step, "mlpipe.component": component.name,
            "mlpipe.component_version": component.version,
            "mlpipe.component_digest": component.digest, "mlpipe.target": "local"}


__all__ = ["close_run", "open_run", "step_tags"]
