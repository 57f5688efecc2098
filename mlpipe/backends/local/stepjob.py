"""What the scheduler hands a step process (:class:`StepJob`) and what comes back
(:class:`StepOutcome`): plain values, shared by the modules that run, mask and file a step."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mlpipe.digests.snapshot import ContentDigest
from mlpipe.spec import ComponentSpec


@dataclass(slots=True)
class StepJob:
    """Everything one step process needs; built by the scheduler."""

    node_id: str
    component: ComponentSpec
    inputs: dict[str, str]            # port -> path
    input_digests: dict[str, str]     # port -> content digest
    params: dict[str, Any]
    work: Path
    log: Path
    cwd: str
    sys_path: list[str]
    pipeline: str = "mlpipe"   # the MLflow experiment of its run, when MLflow is on
    run_id: str = ""
    bin_folder: str | None = None  # an isolated environment's bin/ (None: mlpipe's own)
    #: the parameters that are secrets: handed over in the environment, masked in its log
    secrets: frozenset[str] = frozenset()
    #: every secret value of the run (name -> value), masked in this step's log too
    masked: dict[str, str] = field(default_factory=dict)
    #: where each input is wired from (judgements.diagnosis.wiring), for a failure's diagnosis
    wiring: tuple[Any, ...] = ()


@dataclass(slots=True)
class StepOutcome:
    """What happened: success, the filed outputs, metrics, and why it may not be cached."""

    ok: bool
    seconds: float
    outputs: dict[str, tuple[ContentDigest, Path]] = field(default_factory=dict)
    metrics: list[dict[str, Any]] = field(default_factory=list)
    message: str | None = None
    not_cached: str | None = None
    topology: dict[str, Any] = field(default_factory=dict)
    record: dict[str, Any] | None = None
    files: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
