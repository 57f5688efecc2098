"""MLflow as a metric channel: when a tracking URI is active (Azure ML sets one in every job;
locally ``MLFLOW_TRACKING_URI``), each metric ``log_metric`` records also goes to the step's
MLflow run, with mlpipe's tags saying its scope, population, rank and reduction.

The convention ``sync`` reads (docs/azure.md, "Metrics in MLflow"): a global metric is logged
once, by rank 0, under its own name; a partial metric under ``NAME.rank<R>``; for each key
``K`` the run carries ``mlpipe.scope.K``, ``mlpipe.metric.K`` (the metric's name),
``mlpipe.rank.K``, and where known ``mlpipe.population.K`` and ``mlpipe.reduced_over.K``.

mlflow is optional (``pip install 'mlpipe-aml[mlflow]'``) and imported only on the first metric
logged with a tracking URI set; a missing package or an unreachable server never fails the
step: the step record says what did not reach MLflow. Never imported by ``import mlpipe``.
"""
from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any

TRACKING_ENV = "MLFLOW_TRACKING_URI"
RUN_ENV = "MLFLOW_RUN_ID"
EXPERIMENT_ENV = "MLFLOW_EXPERIMENT_NAME"
#: Set to "0" to keep metrics out of MLflow even where a tracking URI is set.
SWITCH_ENV = "MLPIPE_MLFLOW"
TAG = "mlpipe."
FLUSH_EVERY_S = 1.0
_BATCH_METRICS = 1000   # MLflow's log_batch limits
_BATCH_TAGS = 100


def active() -> bool:
    """Whether metrics go to MLflow too: a tracking URI is set and mlpipe is not told not to."""
    return bool(os.environ.get(TRACKING_ENV)) and os.environ.get(SWITCH_ENV, "1") != "0"


def metric_key(name: str, scope: str, rank: int | None) -> str:
    """The MLflow metric key of one mlpipe metric: its name when global (or in a process
    without a rank), ``NAME.rank<R>`` when partial.

    Example:
        >>> metric_key("shard_loss", "partial", 3)
        'shard_loss.rank3'
    """
    return name if scope == "global" or rank is None else f"{name}.rank{rank}"


def metric_tags(record: dict[str, Any]) -> dict[str, str]:
    """The run tags that describe one metric record (see the module doc)."""
    key = metric_key(record["name"], record["scope"], record.get("rank"))
    tags = {f"{TAG}scope.{key}": record["scope"], f"{TAG}metric.{key}": record["name"]}
    if record.get("rank") is not None:
        tags[f"{TAG}rank.{key}"] = str(record["rank"])
    if record.get("population") is not None:
        tags[f"{TAG}population.{key}"] = str(record["population"])[:5000]
    if record.get("reduced_over") is not None:
        tags[f"{TAG}reduced_over.{key}"] = str(record["reduced_over"])
    return tags


class Channel:
    """This process's connection to its MLflow run: metrics and tags buffered, sent in
    batches at most every second and at the end of the step."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.metrics: list[tuple[str, float, int, int]] = []   # key, value, ms, step
        self.tags: dict[str, str] = {}
        self.sent_tags: dict[str, str] = {}
        self.steps: dict[str, int] = {}
        self.client: Any = None
        self.run_id: str | None = os.environ.get(RUN_ENV) or None
        self.own_run = False
        self.error: str | None = None
        self.logged = 0
        self.skipped = 0
        self.last_flush = 0.0
        self.started = False

    def state(self) -> dict[str, Any]:
        """What the step record keeps about MLflow."""
        return {"uri": _safe_uri(os.environ.get(TRACKING_ENV)), "run_id": self.run_id,
                "logged": self.logged, "not_logged_global_from_rank": self.skipped,
                "error": self.error}

    def _start(self) -> bool:
        if self.started:
            return self.client is not None
        self.started = True
        try:
            from mlflow.tracking import MlflowClient
        except ImportError:
            self._fail("mlflow is not installed here (pip install 'mlpipe-aml[mlflow]'; on Azure "
                       "ML also azureml-mlflow)")
            return False
        try:
            self.client = MlflowClient()
            if self.run_id is None:
                name = os.environ.get(EXPERIMENT_ENV) or "mlpipe"
                found = self.client.get_experiment_by_name(name)
                experiment = found.experiment_id if found else self.client.create_experiment(name)
                self.run_id = self.client.create_run(experiment).info.run_id
                self.own_run = True
        except Exception as exc:  # mlflow raises many kinds; none may fail the step
            self.client = None
            self._fail(f"the MLflow tracking server did not answer: {_first_line(exc)}")
            return False
        return True

    def _fail(self, why: str) -> None:
        if self.error is None:
            self.error = why
            print(f"mlpipe: warning: metrics do not reach MLflow: {why}; they are kept in the "
                  f"step record", file=sys.stderr)

    def add(self, record: dict[str, Any]) -> None:
        rank = record.get("rank")
        if record["scope"] == "global" and rank not in (None, 0):
            with self.lock:
                self.skipped += 1  # only rank 0 speaks for the whole population
            return
        key = metric_key(record["name"], record["scope"], rank)
        with self.lock:
            step = self.steps.get(key, 0)
            self.steps[key] = step + 1
            self.metrics.append((key, float(record["value"]), int(time.time() * 1000), step))
            for tag, value in metric_tags(record).items():
                if self.sent_tags.get(tag) != value:
                    self.tags[tag] = value
            if time.monotonic() - self.last_flush >= FLUSH_EVERY_S:
                self.flush()

    def flush(self) -> None:
        with self.lock:
            if not self.metrics and not self.tags:
                return
            if not self._start():
                self.metrics.clear()
                self.tags.clear()
                return
            from mlflow.entities import Metric, RunTag

            metrics, tags = self.metrics, self.tags
            self.metrics, self.tags = [], {}
            self.last_flush = time.monotonic()
            try:
                items = sorted(tags.items())
                for i in range(0, max(len(metrics), 1), _BATCH_METRICS):
                    chunk = [Metric(k, v, ms, s) for k, v, ms, s in metrics[i:i + _BATCH_METRICS]]
                    first = items[:_BATCH_TAGS]
                    items = items[_BATCH_TAGS:]
                    self.client.log_batch(self.run_id, metrics=chunk,
                                          tags=[RunTag(k, v) for k, v in first])
                    self.sent_tags.update(first)
                while items:
                    first, items = items[:_BATCH_TAGS], items[_BATCH_TAGS:]
                    self.client.log_batch(self.run_id, tags=[RunTag(k, v) for k, v in first])
                    self.sent_tags.update(first)
                self.logged += len(metrics)
            except Exception as exc:
                self._fail(f"logging to run {self.run_id} failed: {_first_line(exc)}")

    def close(self, failed: bool) -> None:
        """Send what is buffered; end the run if this process created it."""
        self.flush()
        if self.own_run and self.client is not None:
            try:
                self.client.set_terminated(self.run_id, "FAILED" if failed else "FINISHED")
            except Exception as exc:
                self._fail(f"ending run {self.run_id} failed: {_first_line(exc)}")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def _safe_uri(uri: str | None) -> str | None:
    """The tracking URI without credentials (``https://user:secret@host`` -> ``https://host``)."""
    from urllib.parse import urlsplit, urlunsplit

    if not uri:
        return uri
    parts = urlsplit(uri)
    if not (parts.username or parts.password) or parts.hostname is None:
        return uri
    netloc = parts.hostname + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


_CHANNEL: Channel | None = None
_CHANNEL_PID: int | None = None
_LOCK = threading.Lock()


def channel() -> Channel | None:
    """This process's channel (created on first use), or None when MLflow is not active."""
    global _CHANNEL, _CHANNEL_PID
    if not active():
        return None
    with _LOCK:
        if _CHANNEL is None or _CHANNEL_PID != os.getpid():
            _CHANNEL, _CHANNEL_PID = Channel(), os.getpid()
            import atexit
            atexit.register(_flush_at_exit, _CHANNEL)
        return _CHANNEL


def _flush_at_exit(channel: "Channel") -> None:
    """Flush what is left at interpreter exit with bounded requests: a tracking server that is
    gone by then must not hold the process for MLflow's minutes of retries."""
    os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] = "0"
    os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] = "5"
    channel.flush()


def log(record: dict[str, Any]) -> None:
    """Send one metric record to MLflow when a tracking URI is active (else nothing)."""
    found = channel()
    if found is not None:
        found.add(record)


def close(failed: bool = False) -> dict[str, Any] | None:
    """Flush this process's channel at the end of its step; what the record keeps about it
    (None when MLflow was never used)."""
    global _CHANNEL
    with _LOCK:
        found = _CHANNEL if _CHANNEL_PID == os.getpid() else None
    if found is None:
        return None
    found.close(failed)
    return found.state()


__all__ = [
    "RUN_ENV",
    "SWITCH_ENV",
    "TRACKING_ENV",
    "Channel",
    "active",
    "channel",
    "close",
    "log",
    "metric_key",
    "metric_tags",
]
