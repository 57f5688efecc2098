"""The step record: what one step left behind, rank by rank, in one small folder.

Each process of a step keeps its part in memory and writes it, whole and atomically, to
``<record>/rank-<RANK>.json``; the finisher (rank 0) writes ``<record>/step.json`` after every
rank has finished. ``load_record`` assembles the folder into one document that
``step_record.schema.json`` describes (docs/step-record.md). The folder is
``$MLPIPE_STEP_DIR``: the step's scratch folder locally, the ``mlpipe_record`` output on Azure ML.

Imports nothing above ``errors``; never imports torch or mlflow.
"""
from __future__ import annotations

import json
import os
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mlpipe.runtime.launchenv import int_var, tf_config

#: The folder of this step's record (set by the local executor, or by the runtime from
#: ``--record`` on Azure ML).
RECORD_DIR_ENV = "MLPIPE_STEP_DIR"
FORMAT = "mlpipe.step-record"
VERSION = 1
STEP_FILE = "step.json"
RANK_PREFIX = "rank-"
OBSERVED_DIR = "observed"
SCHEMA_FILE = Path(__file__).with_name("step_record.schema.json")
#: Metrics are written at most this often while a step runs (and always at its end).
SAVE_EVERY_S = 1.0
#: Layers a failure is attributed to (docs/step-record.md, "failure").
LAYERS = ("input-contract", "step-code", "launch", "output-completeness", "output-contract",
          "runtime")


def _hostname() -> str:
    import socket  # here, not at import: every component module imports the runtime

    return socket.gethostname()


def now() -> str:
    """The current UTC time, ISO-8601 with microseconds."""
    return datetime.now(UTC).isoformat()


def _tf_task() -> tuple[int | None, int | None, str]:
    tf = tf_config()
    if tf is None:
        return None, None, "worker"
    task = tf.get("task") or {}
    workers = len((tf.get("cluster") or {}).get("worker", [])) or None
    index = task.get("index")
    return (int(index) if isinstance(index, int) else None), workers, str(task.get("type")
                                                                          or "worker")


def identity() -> dict[str, Any]:
    """This process's place in its launch, from the variables the launcher set (Azure ML or
    mlpipe's local one): rank, world size, local rank, node rank and role."""
    tf_index, tf_workers, role = _tf_task()
    rank = int_var("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK")
    world = int_var("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE")
    if rank is None:
        rank = tf_index if tf_index is not None and role == "worker" else 0
    if world is None:
        world = tf_workers or 1
    return {"rank": rank, "world_size": world,
            "local_rank": int_var("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK") or 0,
            "node_rank": int_var("NODE_RANK", "OMPI_COMM_WORLD_NODE_RANK") or 0,
            "role": role}


def rank_file(folder: str | os.PathLike[str], rank: int, role: str = "worker") -> Path:
    """Where rank ``rank`` keeps its part (a TensorFlow parameter server: ``rank-ps<N>``)."""
    name = f"{RANK_PREFIX}{rank}" if role == "worker" else f"{RANK_PREFIX}{role}{rank}"
    return Path(folder) / f"{name}.json"


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Write ``data`` to ``path`` whole: a reader sees the old or the new file, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    text = json.dumps(data, separators=(",", ":"))  # C's encoder; json.dump is Python's
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, path)


class RankPart:
    """This process's part of the step record, kept in memory and saved whole.

    Created on first use by ``current()`` (when ``$MLPIPE_STEP_DIR`` is set); the step runtime
    fills in the validation, failure and observation, the helpers in ``mlpipe.runtime`` the
    metrics and coordination facts.
    """

    def __init__(self, folder: str | os.PathLike[str], *, parent: int | None = None) -> None:
        self.folder = Path(folder)
        self.parent = parent
        who = identity()
        self.lock = threading.RLock()
        self.last_save = 0.0
        self.dirty = False
        self.data: dict[str, Any] = {
            "format": f"{FORMAT}.rank", "version": VERSION, **who,
            "host": _hostname(), "pid": os.getpid(),
            "python": sys.version.split()[0], "started_at": now(), "finished_at": None,
            "status": "running", "failure": None, "launch": None, "inputs": {},
            "metrics": [], "reductions": [], "consumed": [], "population": [],
            "marked_written": [], "reads_outside_inputs": None, "reads_inputs": None,
            "writes": None,
            "writes_elsewhere": None, "observation": None, "data_loaders": None,
            "trace": None,
        }
        self._seen: dict[str, set[str]] = {"consumed": set(), "population": set(),
                                           "marked_written": set()}

    @property
    def rank(self) -> int:
        return self.data["rank"]

    @property
    def path(self) -> Path:
        if self.parent is not None:  # a process the rank forked: its own file, merged later
            return (self.folder / OBSERVED_DIR
                    / f"{rank_file(self.folder, self.rank, self.data['role']).stem}"
                      f".pid-{self.data['pid']}.json")
        return rank_file(self.folder, self.data["rank"], self.data["role"])

    def add_ids(self, key: str, values: Any) -> None:
        with self.lock:
            seen, out = self._seen[key], self.data[key]
            for v in values:
                s = str(v)
                if s not in seen:
                    seen.add(s)
                    out.append(s)
        self.save(force=True)

    def add_metric(self, record: dict[str, Any]) -> None:
        with self.lock:
            self.data["metrics"].append({**record, "at": now()})
        self.save()

    def add_reduction(self, reduction: dict[str, Any]) -> None:
        with self.lock:
            self.data["reductions"].append(reduction)
        self.save(force=True)

    def update(self, **fields: Any) -> None:
        with self.lock:
            self.data.update(fields)
        self.save(force=True)

    def save(self, force: bool = False) -> None:
        """Write the part now (``force``), or when the last write is over a second old."""
        with self.lock:
            self.dirty = True
            if not force and time.monotonic() - self.last_save < SAVE_EVERY_S:
                return
            try:
                write_json(self.path, self.data)
            except OSError:
                return  # a full or read-only disk must not fail the step; the end retries
            self.dirty = False
            self.last_save = time.monotonic()

    def flush(self) -> None:
        if self.dirty:
            self.save(force=True)


_PART: RankPart | None = None
_PART_LOCK = threading.Lock()


def folder() -> str | None:
    """The record folder of the step this process belongs to, or None outside a step."""
    return os.environ.get(RECORD_DIR_ENV) or None


def current() -> RankPart | None:
    """This process's part of its step's record (created on first use); None outside a step.

    Example:
        >>> part = current()          # MLPIPE_STEP_DIR=/tmp/s RANK=1
        >>> part.path.name
        'rank-1.json'
    """
    global _PART
    where = folder()
    if where is None:
        return None
    with _PART_LOCK:
        if _PART is None or str(_PART.folder) != where or _PART.data["pid"] != os.getpid():
            parent = None
            if _PART is not None and str(_PART.folder) == where:
                parent = _PART.data["pid"]  # forked from the rank: a child part
            _PART = RankPart(where, parent=parent)
            _at_exit(_PART)
        return _PART


def _at_exit(part: RankPart) -> None:
    import atexit
    atexit.register(part.flush)
    mp = sys.modules.get("multiprocessing.util")
    if part.parent is not None and mp is not None:
        # a multiprocessing worker leaves through os._exit after running its finalizers
        mp.Finalize(part, part.flush, exitpriority=100)


def reset() -> None:
    """Save and forget this process's part: the next ``current()`` starts a new one (a new
    step begins in this process)."""
    global _PART
    with _PART_LOCK:
        if _PART is not None and _PART.data["pid"] == os.getpid():
            _PART.flush()
        _PART = None


def merge_children(part: RankPart) -> None:
    """Fold the parts that processes forked by this rank left (``observed/``) into ``part``:
    their metrics, coordination facts and observations become the rank's."""
    pattern = f"{part.path.stem}.pid-"
    try:
        names = sorted(n for n in os.listdir(part.folder / OBSERVED_DIR)
                       if n.startswith(pattern) and n.endswith(".json"))
    except OSError:
        return
    with part.lock:
        for name in names:
            child = _read(part.folder / OBSERVED_DIR / name)
            if child is None:
                continue
            part.data["metrics"].extend(child.get("metrics") or [])
            part.data["reductions"].extend(child.get("reductions") or [])
            for key in ("consumed", "population", "marked_written"):
                part.add_ids(key, child.get(key) or [])
            for key in ("reads_outside_inputs", "writes_elsewhere"):
                if child.get(key):
                    merged = set(part.data.get(key) or []) | set(child[key])
                    part.data[key] = sorted(merged)
            for key in ("writes", "reads_inputs"):
                if child.get(key):
                    merged_ports = dict(part.data.get(key) or {})
                    for port, files in child[key].items():
                        merged_ports[port] = sorted(set(merged_ports.get(port, [])) | set(files))
                    part.data[key] = merged_ports
            part.data.setdefault("children", []).append(child.get("pid"))
    if names:
        part.save(force=True)


# --- reading ------------------------------------------------------------------------------

def _read(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    return data if isinstance(data, dict) else None


def rank_parts(where: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every rank's part found in record folder ``where``, by rank (unreadable ones skipped)."""
    root = Path(where)
    found = []
    try:
        names = sorted(os.listdir(root))
    except OSError:
        return []
    for name in names:
        if name.startswith(RANK_PREFIX) and name.endswith(".json"):
            data = _read(root / name)
            if data is not None and isinstance(data.get("rank"), int):
                found.append(data)
    return sorted(found, key=lambda d: (d.get("role") != "worker", d["rank"]))


def load_record(where: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The step record in folder ``where``, assembled: ``{"format", "version", "step",
    "ranks"}`` (``step`` is None until the finisher wrote it); None when the folder holds no
    record at all.

    Example:
        >>> record = load_record("evidence/work/r-1/train/step")
        >>> [r["rank"] for r in record["ranks"]], record["step"]["status"]
        ([0, 1, 2, 3], 'succeeded')
    """
    root = Path(where)
    step = _read(root / STEP_FILE)
    ranks = rank_parts(root)
    if step is None and not ranks:
        return None
    return {"format": FORMAT, "version": VERSION, "step": step, "ranks": ranks}


def metrics(record: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Every metric line of every rank of ``record``, in rank order."""
    out = []
    for part in (record or {}).get("ranks", []):
        for line in part.get("metrics") or []:
            if isinstance(line, dict):
                out.append(line)
    return out


_BULKY = ("metrics", "consumed", "population")


def stored(found: dict[str, Any] | None) -> dict[str, Any] | None:
    """The record as the evidence store keeps it: the same document with each rank's
    ``metrics``, ``consumed`` and ``population`` lists replaced by their counts
    (``metric_count``...; the metrics have their own table) and each output's ``files`` left
    out (they go to the artifact).

    Example:
        >>> stored(load_record(folder))["ranks"][0]["consumed_count"]
        53
    """
    if found is None:
        return None
    ranks = []
    for part in found.get("ranks") or []:
        kept = {k: v for k, v in part.items() if k not in _BULKY}
        if isinstance(kept.get("trace"), dict):   # the indices dealt: their count is kept
            kept["trace"] = {**kept["trace"], "samplers": [
                {**s, "indices": None} for s in kept["trace"].get("samplers") or []]}
        kept["metric_count"] = len(part.get("metrics") or [])
        kept["consumed_count"] = len(part.get("consumed") or [])
        kept["population_count"] = len(part.get("population") or [])
        ranks.append(kept)
    step = found.get("step")
    if step is not None:
        step = {**step, "outputs": {
            port: {k: v for k, v in entry.items() if k != "files"}
            for port, entry in (step.get("outputs") or {}).items()}}
        step["consumed_ids"] = consumed_ids(found)
        step["opened_inputs"] = opened_inputs(found)
    return {"format": found.get("format", FORMAT), "version": found.get("version", VERSION),
            "stored": True, "step": step, "ranks": ranks}


#: Example ids the stored record keeps one by one; past it, their count and digest only.
MAX_STORED_IDS = 20_000


def consumed_ids(found: dict[str, Any] | None) -> dict[str, Any] | None:
    """The example ids the step's ranks consumed, together (``shard``, ``record_consumed``):
    ``{count, digest, ids}`` (``digest``: SHA-256 of the sorted ids, one a line; ``ids``
    sorted, null past ``MAX_STORED_IDS``), so that the evidence can tell whether an evaluation
    consumed examples its training did. None when no rank recorded any.

    Example:
        >>> consumed_ids(load_record(folder))["count"]
        210
    """
    from mlpipe.digests import digest_lines

    ids = sorted({str(i) for part in (found or {}).get("ranks") or []
                  if part.get("role", "worker") == "worker"
                  for i in part.get("consumed") or []})
    if not ids:
        return None
    return {"count": len(ids), "digest": digest_lines(ids),
            "ids": ids if len(ids) <= MAX_STORED_IDS else None}


def opened_inputs(found: dict[str, Any] | None) -> dict[str, Any] | None:
    """The files the step's worker ranks opened for reading under each declared input,
    together: port -> ``{count, digest, files}`` (``digest``: SHA-256 of the sorted relative
    paths, one a line; ``files`` sorted, null past ``MAX_STORED_IDS``), so that the evidence
    can tell whether two steps given one artifact read the same files of it. None when any
    worker rank was not observed (then nobody can say what it opened).

    Example:
        >>> opened_inputs(load_record(folder))["examples"]["count"]
        120
    """
    from mlpipe.digests import digest_lines

    workers = [p for p in (found or {}).get("ranks") or [] if p.get("role", "worker") == "worker"]
    if not workers or any(not isinstance(p.get("reads_inputs"), dict) for p in workers):
        return None
    ports: dict[str, set[str]] = {}
    for part in workers:
        for port, files in part["reads_inputs"].items():
            ports.setdefault(port, set()).update(str(f) for f in files or [])
    out = {}
    for port, files in sorted(ports.items()):
        names = sorted(files)
        out[port] = {"count": len(names), "digest": digest_lines(names),
                     "files": names if len(names) <= MAX_STORED_IDS else None}
    return out


_CONTRACT_LAYERS = ("input-contract", "output-contract", "output-completeness")


def failure(found: dict[str, Any] | None) -> dict[str, Any] | None:
    """The failure a record names: the finisher's, else the first failed rank's."""
    if not found:
        return None
    return (found.get("step") or {}).get("failure") or next(
        (p["failure"] for p in found.get("ranks") or [] if p.get("failure")), None)


def failure_message(step: str, found: dict[str, Any] | None) -> str | None:
    """The message a failed step shows, worded the same for every backend:
    ``step 'evaluate': output 'report' does not match its contract: ...``; None when the
    record names no failure."""
    named = failure(found)
    if not named:
        return None
    layer, message = named.get("layer"), named.get("message")
    if layer == "output-completeness":
        return f"step {step!r} {message}"
    if layer in _CONTRACT_LAYERS:
        return f"step {step!r}: {message}"
    return f"step {step!r} failed: {message}"


def schema() -> dict[str, Any]:
    """The JSON Schema of an assembled record (``load_record``'s result)."""
    return json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))


__all__ = [
    "FORMAT",
    "LAYERS",
    "RECORD_DIR_ENV",
    "STEP_FILE",
    "VERSION",
    "RankPart",
    "consumed_ids",
    "current",
    "folder",
    "identity",
    "load_record",
    "merge_children",
    "metrics",
    "now",
    "opened_inputs",
    "rank_file",
    "rank_parts",
    "reset",
    "schema",
    "stored",
    "write_json",
]
