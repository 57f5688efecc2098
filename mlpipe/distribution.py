"""How a component's processes are launched: the Azure ML ``distribution`` block.

Each type maps one-to-one onto azure-ai-ml's PyTorch/TensorFlow/Mpi distribution. Values only;
the checks that judge a launch design live in ``mlpipe.checks``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar


def _positive(name: str, value: int | None, *, allow_zero: bool = False) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    if value < (0 if allow_zero else 1):
        raise ValueError(f"{name} must be {'>= 0' if allow_zero else '>= 1'}, got {value}")


@dataclass(frozen=True, slots=True)
class Distribution:
    """Base of the distribution types."""

    type: ClassVar[str] = ""

    def to_dict(self) -> dict[str, Any]:
        raise NotImplementedError

    def processes_per_instance(self) -> int:
        """Processes Azure ML starts on each node for this distribution."""
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class PyTorch(Distribution):
    """``distribution: {type: pytorch, process_count_per_instance: N}``.

    Args:
        processes_per_node: processes on each node; Azure ML starts one when omitted.
    """

    processes_per_node: int | None = None
    type: ClassVar[str] = "pytorch"

    def __post_init__(self) -> None:
        _positive("processes_per_node", self.processes_per_node)

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "processes_per_node": self.processes_per_node}

    def processes_per_instance(self) -> int:
        return self.processes_per_node or 1


@dataclass(frozen=True, slots=True)
class TensorFlow(Distribution):
    """``distribution: {type: tensorflow, worker_count: N, parameter_server_count: M}``.

    Args:
        workers: worker processes in all; Azure ML defaults it to the instance count.
        parameter_servers: legacy TensorFlow 1.x parameter servers; 0 for TF2 code.
    """

    workers: int | None = None
    parameter_servers: int = 0
    type: ClassVar[str] = "tensorflow"

    def __post_init__(self) -> None:
        _positive("workers", self.workers)
        _positive("parameter_servers", self.parameter_servers, allow_zero=True)

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "workers": self.workers,
                "parameter_servers": self.parameter_servers}

    def processes_per_instance(self) -> int:
        return 1


@dataclass(frozen=True, slots=True)
class Mpi(Distribution):
    """``distribution: {type: mpi, process_count_per_instance: N}`` (required by Azure ML).

    Args:
        processes_per_node: ranks on each node.
    """

    processes_per_node: int | None = None
    type: ClassVar[str] = "mpi"

    def __post_init__(self) -> None:
        _positive("processes_per_node", self.processes_per_node)

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "processes_per_node": self.processes_per_node}

    def processes_per_instance(self) -> int:
        return self.processes_per_node or 1
