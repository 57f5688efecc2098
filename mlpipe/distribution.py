"""How a component's processes are launched: the Azure ML ``distribution`` block, plus what the
launch contract needs beyond it (declared backend, output writers, metric aggregation).

Each type maps one-to-one onto azure-ai-ml's PyTorch/TensorFlow/Mpi distribution. Values only;
the checks that judge a launch design live in ``mlpipe.checks.distribution``.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass
from typing import Any, ClassVar

#: Who writes an output of a distributed step: ``"rank0"`` (global rank 0, the default
#: convention), an ``int`` global rank, or ``"sharded"`` (every rank writes its own part,
#: ``<output>/rank-<RANK>/...``; a framework-supported sharded save).
WriterPolicy = str | int
WRITER_POLICIES = ("rank0", "sharded")

#: How a global metric is made from the ranks' partial values: an all-reduce operation, or
#: ``"rank0"`` (rank 0 alone computes it over the whole population).
REDUCTIONS = ("mean", "sum", "min", "max", "rank0")
BACKENDS = ("nccl", "gloo", "mpi")
#: Libraries people mistake for Azure ML job types; they live in the training script.
LIBRARIES = ("deepspeed", "fsdp", "horovod", "zero", "megatron")
ALL_OUTPUTS = "*"


#: How a component read from YAML with a distribution mlpipe does not launch (``ray``) ends
#: its ``azure_only`` reason: it is distributed, by a launcher only Azure ML starts.
FOREIGN_LAUNCH = "distribution, which the local launcher cannot start"


def _positive(name: str, value: int | None, *, allow_zero: bool = False) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    if value < (0 if allow_zero else 1):
        raise ValueError(f"{name} must be {'>= 0' if allow_zero else '>= 1'}, got {value}")


@dataclass(frozen=True, slots=True)
class MetricPolicy:
    """How a metric logged by a distributed step describes its population.

    Args:
        scope: ``"global"`` (describes the whole population) or ``"partial"`` (one rank's view).
        reduce: for a global metric, how the ranks' values are combined (one of
            ``REDUCTIONS``); None for a partial metric. A global metric without one is
            reported by check MP514.

    Example:
        >>> MetricPolicy("global", "mean")
        MetricPolicy(scope='global', reduce='mean')
    """

    scope: str = "global"
    reduce: str | None = None

    def __post_init__(self) -> None:
        if self.scope not in ("global", "partial"):
            raise ValueError(f"metric scope {self.scope!r} is not 'global' or 'partial'")
        if self.reduce is not None and self.reduce not in REDUCTIONS:
            raise ValueError(f"metric reduction {self.reduce!r} is not one of "
                             f"{', '.join(REDUCTIONS)}")
        if self.scope == "partial" and self.reduce is not None:
            raise ValueError(f"a partial metric is not reduced, got reduce={self.reduce!r}")

    @classmethod
    def parse(cls, value: "MetricPolicy | str") -> "MetricPolicy":
        """``"mean"``/``"sum"``/``"min"``/``"max"``/``"rank0"`` (global, reduced that way),
        ``"partial"``, ``"global"`` (global, no reduction declared) or a ``MetricPolicy``."""
        if isinstance(value, MetricPolicy):
            return value
        if value == "partial":
            return cls("partial")
        if value == "global":
            return cls("global")
        if isinstance(value, str) and value in REDUCTIONS:
            return cls("global", value)
        raise ValueError(f"metric declaration {value!r} is not one of {', '.join(REDUCTIONS)}, "
                         f"'partial', 'global' or a MetricPolicy(...)")

    def to_dict(self) -> dict[str, Any]:
        return {"scope": self.scope, "reduce": self.reduce}


def _writers(value: Any) -> tuple[tuple[str, WriterPolicy], ...]:
    if value is None:
        return ()
    if isinstance(value, tuple) and all(isinstance(p, tuple) and len(p) == 2 for p in value):
        items = list(value)
    elif isinstance(value, Mapping):
        items = list(value.items())
    else:
        items = [(ALL_OUTPUTS, value)]
    for name, policy in items:
        if not isinstance(name, str):
            raise TypeError(f"writers keys are output names, got {name!r}")
        if isinstance(policy, bool) or not (
                policy in WRITER_POLICIES or (isinstance(policy, int) and policy >= 0)):
            raise ValueError(f"writer policy {policy!r} for {name!r} is not 'rank0', "
                             f"'sharded' or a rank number")
    return tuple(sorted(items, key=lambda p: p[0]))


def _metrics(value: Any) -> tuple[tuple[str, MetricPolicy], ...]:
    if value is None:
        return ()
    items = value if isinstance(value, tuple) else list(dict(value).items())
    return tuple(sorted(((str(k), MetricPolicy.parse(v)) for k, v in items), key=lambda p: p[0]))


@dataclass(frozen=True, slots=True)
class Distribution:
    """Base of the distribution types.

    Every type takes, keyword-only:
        writers: who writes the outputs: one policy for all outputs (``"rank0"``) or a dict
            ``{output: policy}``; a policy is ``"rank0"``, a rank number or ``"sharded"``.
        metrics: ``{name: declaration}`` for the metrics the step logs (see ``MetricPolicy.parse``).
    """

    type: ClassVar[str] = ""
    _: KW_ONLY
    writers: Any = ()
    metrics: Any = ()

    def to_dict(self) -> dict[str, Any]:
        raise NotImplementedError

    def processes_per_instance(self) -> int:
        """Processes Azure ML starts on each node for this distribution."""
        raise NotImplementedError

    def world_size(self, instances: int) -> int:
        """Processes in all for ``instances`` nodes."""
        return instances * self.processes_per_instance()

    def writer_policy(self, output: str) -> WriterPolicy | None:
        """The declared writer policy of ``output``, or None when none is declared."""
        table = dict(self.writers)
        return table.get(output, table.get(ALL_OUTPUTS))

    def metric(self, name: str) -> MetricPolicy | None:
        return dict(self.metrics).get(name)

    def _normalize_policies(self) -> None:
        """The declared writer and metric policies, checked and kept sorted (a frozen field)."""
        object.__setattr__(self, "writers", _writers(self.writers))
        object.__setattr__(self, "metrics", _metrics(self.metrics))

    def _common(self) -> dict[str, Any]:
        return {"writers": [[k, v] for k, v in self.writers],
                "metrics": {k: m.to_dict() for k, m in self.metrics}}


@dataclass(frozen=True, slots=True)
class PyTorch(Distribution):
    """``distribution: {type: pytorch, process_count_per_instance: N}``.

    Args:
        processes_per_node: processes on each node; Azure ML starts one when omitted.
        backend: the ``torch.distributed`` backend the code initialises (``"nccl"`` for GPUs,
            ``"gloo"`` for CPUs); None when the code does not say. Checked against the VM size.

    Example:
        >>> PyTorch(processes_per_node=4, backend="nccl", writers="rank0",
        ...         metrics={"loss": "mean"}).world_size(2)
        8
    """

    processes_per_node: int | None = None
    _: KW_ONLY
    backend: str | None = None
    type: ClassVar[str] = "pytorch"

    def __post_init__(self) -> None:
        _positive("processes_per_node", self.processes_per_node)
        if self.backend is not None and self.backend not in BACKENDS:
            raise ValueError(f"backend {self.backend!r} is not one of {', '.join(BACKENDS)}")
        self._normalize_policies()

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "processes_per_node": self.processes_per_node,
                "backend": self.backend, **self._common()}

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
        self._normalize_policies()

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "workers": self.workers,
                "parameter_servers": self.parameter_servers, **self._common()}

    def processes_per_instance(self) -> int:
        return 1

    def world_size(self, instances: int) -> int:
        return self.workers or instances


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
        self._normalize_policies()

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "processes_per_node": self.processes_per_node,
                **self._common()}

    def processes_per_instance(self) -> int:
        return self.processes_per_node or 1


@dataclass(frozen=True, slots=True)
class NotAJobType(Distribution):
    """A distribution "type" that names a library (DeepSpeed, FSDP, Horovod…), kept so that
    check MP510 can report it; it cannot be launched.

    Args:
        requested: the type as written (``"deepspeed"``).
    """

    requested: str = ""
    type: ClassVar[str] = "not-a-job-type"

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.requested}

    def processes_per_instance(self) -> int:
        return 1


_AZURE_KEYS = {"process_count_per_instance": "processes_per_node",
               "worker_count": "workers", "parameter_server_count": "parameter_servers"}


def as_distribution(value: Any) -> Distribution | None:
    """A distribution from a value, an Azure ML dict or a type name.

    Args:
        value: a ``Distribution``, None, ``"pytorch"``/``"tensorflow"``/``"mpi"``, or the SDK v2
            dict form (``{"type": "PyTorch", "process_count_per_instance": 4}``). A library
            name (``"deepspeed"``, ``{"type": "fsdp"}``) becomes ``NotAJobType``.

    Returns:
        The distribution, or None for None.

    Example:
        >>> as_distribution({"type": "PyTorch", "process_count_per_instance": 4})
        PyTorch(processes_per_node=4, backend=None, writers=(), metrics=())
    """
    if value is None or isinstance(value, Distribution):
        return value
    if isinstance(value, str):
        value = {"type": value}
    if not isinstance(value, Mapping) or not isinstance(value.get("type"), str):
        raise TypeError(f"distribution {value!r} is not PyTorch(...), TensorFlow(...), Mpi(...) "
                        f"or a dict with a 'type'")
    kind = value["type"].lower()
    options = {str(_AZURE_KEYS.get(k, k)): v for k, v in value.items() if k != "type"}
    types = {"pytorch": PyTorch, "tensorflow": TensorFlow, "mpi": Mpi}
    if kind in types:
        return types[kind](**options)
    if kind in LIBRARIES or any(lib in kind for lib in LIBRARIES):
        return NotAJobType(requested=value["type"])
    raise ValueError(f"distribution type {value['type']!r} is not pytorch, tensorflow or mpi")
