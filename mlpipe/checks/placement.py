"""Placement checks (MP630-MP639): what crosses from one kind of compute to another, and what
a step's environment must hold for the step runtime to run in it.

Pure: graph in, diagnostics out; facts about VM sizes come from ``mlpipe.compute``.
"""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from mlpipe.artifacts import AssetType
from mlpipe.checks.registry import check
from mlpipe.checks.where import at_edge, at_step
from mlpipe.codes import ENVIRONMENT_WITHOUT_MLPIPE, MODEL_DEVICE_CROSSES_COMPUTE
from mlpipe.compute import CATALOGUE, VmSize
from mlpipe.diagnostics import Diagnostic
from mlpipe.graph import FromStep, Graph, StepNode

_MODEL_KINDS = (AssetType.MLFLOW_MODEL, AssetType.CUSTOM_MODEL)


def _size(node: StepNode) -> VmSize | None:
    return CATALOGUE.resolve(node.component.compute)[0]


def _device(port) -> str | None:
    return getattr(port.contract, "device", None) if port is not None else None


@check(MODEL_DEVICE_CROSSES_COMPUTE)
def model_device(graph: Graph) -> Iterator[Diagnostic]:
    for node in graph.step_nodes():
        here = _size(node)
        if here is None or here.has_gpu:
            continue
        for key, endpoint in node.bindings.items():
            port = node.component.input(key)
            if not isinstance(endpoint, FromStep) or port is None or port.kind not in _MODEL_KINDS:
                continue
            producer = graph.steps.get(endpoint.node)
            there = _size(producer) if producer is not None else None
            made = producer.component.output(endpoint.port) if producer is not None else None
            if there is None or not there.has_gpu or _device(made) == "cpu":
                continue
            source = f"{endpoint.node}.{endpoint.port}"
            yield Diagnostic.of(
                MODEL_DEVICE_CROSSES_COMPUTE,
                f"step '{node.id}' loads model '{source}' on {here.describe()}, but "
                f"'{endpoint.node}' trains it on {there.describe()}: tensors saved there are "
                f"CUDA tensors unless moved to the CPU, and torch.load fails without a GPU",
                hint=f"save CPU tensors and declare Output[MLflowModel(..., device='cpu')] on "
                     f"'{source}' (the runtime then checks the saved model), and load it with "
                     f"torch.load(..., map_location=mlpipe.runtime.device())",
                **at_edge(graph, source, f"{node.id}.{key}", node))


def _lists_mlpipe(conda_file: Path) -> bool | None:
    """Whether a conda specification lists mlpipe (as a conda or pip dependency); None
    when it cannot be read."""
    import yaml

    try:
        doc = yaml.safe_load(conda_file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    names = []
    dependencies = doc.get("dependencies") if isinstance(doc, dict) else None
    for dep in dependencies or []:
        if isinstance(dep, str):
            names.append(dep)
        elif isinstance(dep, dict):
            names += [p for p in dep.get("pip") or [] if isinstance(p, str)]
    for name in names:
        base = name.strip().lower().replace("_", "-")
        for sep in ("=", "<", ">", "!", "~", "[", " ", "@", ";"):
            base = base.split(sep, 1)[0]
        wheel = "mlpipe-" in name.lower() and name.lower().endswith((".whl", ".tar.gz"))
        if base == "mlpipe" or wheel:
            return True
    return False


@check(ENVIRONMENT_WITHOUT_MLPIPE)
def environment_has_mlpipe(graph: Graph) -> Iterator[Diagnostic]:
    for node in graph.step_nodes():
        comp = node.component
        env = comp.environment
        if comp.function is None or env is None or not env.conda_file:
            continue  # a registered environment cannot be inspected here (docs/azure.md)
        path = Path(env.conda_file)
        if not path.is_absolute() and comp.location is not None:
            path = Path(comp.location.file).resolve().parent / path
        if _lists_mlpipe(path) is False:
            yield Diagnostic.of(
                ENVIRONMENT_WITHOUT_MLPIPE,
                f"step '{node.id}' runs its body with `python -m mlpipe.runtime.step` in "
                f"environment {env.name!r}, whose conda file {env.conda_file} does not list "
                f"mlpipe: the job would fail with 'No module named mlpipe'",
                hint="add mlpipe to the conda file's pip dependencies (the version that "
                     "compiles the pipeline)", **at_step(node))
