"""Placement checks (MP630-MP639): what crosses from one kind of compute to another, and what
a step's environment must hold for the step runtime to run in it.

Pure: graph in, diagnostics out; facts about VM sizes come from ``mlpipe.compute``.
"""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from mlpipe.artifacts import AssetType
from mlpipe.checks.body import PLACING_MODULES, TORCH_MODULES, BodyFacts, body_facts
from mlpipe.checks.registry import check
from mlpipe.checks.where import at_edge, at_step
from mlpipe.codes import ENVIRONMENT_WITHOUT_MLPIPE, MODEL_DEVICE_CROSSES_COMPUTE
from mlpipe.compute import CATALOGUE, VmSize
from mlpipe.diagnostics import Diagnostic, Severity
from mlpipe.environments import declared_conda_file, runtime_line, runtime_listing
from mlpipe.graph import FromStep, Graph, StepNode
from mlpipe.version import DISTRIBUTION, __version__

_MODEL_KINDS = (AssetType.MLFLOW_MODEL, AssetType.CUSTOM_MODEL)


def _size(node: StepNode) -> VmSize | None:
    return CATALOGUE.resolve(node.component.compute)[0]


def _device(port) -> str | None:
    return getattr(port.contract, "device", None) if port is not None else None


#: What writes a torch pickle (CUDA tensors stay CUDA tensors in it).
_TORCH_SAVES = ("torch.save", "torch.jit.save", "mlflow.pytorch.save_model",
                "mlflow.pytorch.log_model")


def _tops(facts: BodyFacts) -> set[str]:
    return {name.split(".")[0] for name in facts.imports}


def _placement(facts: BodyFacts | None) -> tuple[str, str, int | None] | None:
    """What the producer's code shows of saving CUDA tensors: ``("observed", what, line)``
    where it imports torch and names a GPU placement, ``("unknown", why, None)`` where its code
    cannot tell, None where it shows no torch or no GPU placement."""
    if facts is None:
        return ("unknown", "its code cannot be read here (a script, or a function built at "
                           "run time)", None)
    tops = _tops(facts)
    if not tops & TORCH_MODULES:
        return None   # no torch: nothing it saves is a torch pickle of CUDA tensors
    placing = sorted(tops & PLACING_MODULES)
    if facts.devices:
        what, line = facts.devices[0]
        placed = f"its code puts tensors on the GPU ({what} at line {line})"
        if facts.uses(*_TORCH_SAVES) is None:
            return ("unsaved", f"{placed} but saves nothing through torch that its code shows "
                               f"(torch.save, mlflow.pytorch)", line)
        return ("observed", placed, line)
    if placing:
        return ("observed", f"it trains with {placing[0]}, which puts the model on the GPU by "
                            f"itself", None)
    return None


@check(MODEL_DEVICE_CROSSES_COMPUTE)
def model_device(graph: Graph) -> Iterator[Diagnostic]:
    for node in graph.step_nodes():
        here = _size(node)
        if here is None or here.has_gpu:
            continue
        consumer = body_facts(node.component)
        maps = consumer is not None and any(w == "map_location=" for w, _ in consumer.cpu_moves)
        for key, endpoint in node.bindings.items():
            port = node.component.input(key)
            if not isinstance(endpoint, FromStep) or port is None or port.kind not in _MODEL_KINDS:
                continue
            producer = graph.steps.get(endpoint.node)
            there = _size(producer) if producer is not None else None
            made = producer.component.output(endpoint.port) if producer is not None else None
            if producer is None or there is None or not there.has_gpu or _device(made) == "cpu" \
                    or maps:
                continue
            facts = body_facts(producer.component)
            seen = _placement(facts)
            if seen is None:
                continue
            how, basis, _ = seen
            source = f"{endpoint.node}.{endpoint.port}"
            hint = (f"save CPU tensors and declare Output[MLflowModel(..., device='cpu')] on "
                    f"'{source}' (the runtime then checks the saved model), or load it with "
                    f"torch.load(..., map_location=mlpipe.runtime.device())")
            where = at_edge(graph, source, f"{node.id}.{key}", node)
            if how == "observed" and facts is not None and facts.cpu_moves:
                moved, at = facts.cpu_moves[0]
                yield Diagnostic.of(
                    MODEL_DEVICE_CROSSES_COMPUTE,
                    f"step '{node.id}' loads model '{source}' on {here.describe()}; "
                    f"'{endpoint.node}' trains it on {there.describe()} and {basis}, and also "
                    f"moves something to the CPU ({moved} at line {at}): whether what it saved "
                    f"holds CUDA tensors cannot be told from its code", hint=hint,
                    severity=Severity.INFO, **where)
            elif how == "observed":
                yield Diagnostic.of(
                    MODEL_DEVICE_CROSSES_COMPUTE,
                    f"step '{node.id}' loads model '{source}' on {here.describe()}, but "
                    f"'{endpoint.node}' trains it on {there.describe()} and {basis}: torch "
                    f"saves such tensors as CUDA tensors, and torch.load of them fails without "
                    f"a GPU", hint=hint, **where)
            elif how == "unsaved":
                yield Diagnostic.of(
                    MODEL_DEVICE_CROSSES_COMPUTE,
                    f"step '{node.id}' loads model '{source}' on {here.describe()}; "
                    f"'{endpoint.node}' trains it on {there.describe()} and {basis}: whether "
                    f"what it saved holds CUDA tensors cannot be told from its code", hint=hint,
                    severity=Severity.INFO, **where)
            else:
                yield Diagnostic.of(
                    MODEL_DEVICE_CROSSES_COMPUTE,
                    f"step '{node.id}' loads model '{source}' on {here.describe()}, trained on "
                    f"{there.describe()} by '{endpoint.node}', whose device use is unknown: "
                    f"{basis}; if it saved CUDA tensors, torch.load fails without a GPU",
                    hint=f"declare Output[MLflowModel(..., device='cpu')] on '{source}' so "
                         f"the runtime checks the saved model, or load it with "
                         f"map_location=mlpipe.runtime.device()", severity=Severity.INFO,
                    **where)


def _runtime_listings(conda_file: Path) -> list[tuple[str, bool, str | None]] | None:
    """``(line, ours, pinned version)`` for each line of a conda specification (its conda
    and pip dependencies) that names mlpipe; None when it cannot be read."""
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
    found = []
    for line in names:
        listing = runtime_listing(line)
        if listing is not None:
            found.append((line, *listing))
    return found


def _runtime_problem(env_name: str, conda_file: str,
                     listings: list[tuple[str, bool, str | None]]) -> tuple[str, str] | None:
    """(what is wrong, the fix) with how a conda file installs the step runtime; None when it
    installs this mlpipe's, at the version that compiles the pipeline."""
    line = runtime_line()
    where = f"environment {env_name!r}, whose conda file {conda_file}"
    ours = [(text, pin) for text, mine, pin in listings if mine]
    if any(pin == __version__ for _, pin in ours):
        return None
    if ours:
        text, pin = ours[0]
        if pin is None:
            return (f"{where} lists {text!r} without pinning the version that compiles the "
                    f"pipeline ({__version__}): the image gets whichever version is newest "
                    f"when it is built, whose runtime may read the step differently",
                    f"pin it: \"{line}\" in the conda file's pip dependencies")
        return (f"{where} pins {DISTRIBUTION} {pin}, but the pipeline is compiled by "
                f"{DISTRIBUTION} {__version__}: the step would run under another runtime "
                f"than the one that checked it", f"pin \"{line}\" instead")
    others = [text for text, mine, _ in listings if not mine]
    if others:
        return (f"{where} lists {others[0]!r}: the package index gives the name 'mlpipe' to "
                f"an unrelated project (0.1.0 ... 0.1.17), so the job would install that "
                f"project and fail with 'No module named mlpipe.runtime'",
                f"replace it with \"{line}\" (mlpipe's distribution is {DISTRIBUTION})")
    return (f"{where} does not list {DISTRIBUTION}: the job would fail with 'No module "
            f"named mlpipe'", f"add \"{line}\" to the conda file's pip dependencies")


@check(ENVIRONMENT_WITHOUT_MLPIPE)
def environment_has_mlpipe(graph: Graph) -> Iterator[Diagnostic]:
    for node in graph.step_nodes():
        comp = node.component
        env = comp.environment
        conda = declared_conda_file(env, comp.location.file if comp.location else None)
        if comp.function is None or env is None or conda is None:
            continue  # a registered environment the project does not declare cannot be
            # inspected here (docs/azure.md)
        listings = _runtime_listings(conda[0])
        problem = None if listings is None else _runtime_problem(env.name, conda[1], listings)
        if problem is not None:
            yield Diagnostic.of(
                ENVIRONMENT_WITHOUT_MLPIPE,
                f"step '{node.id}' runs its body with `python -m mlpipe.runtime.step` in "
                f"{problem[0]}", hint=problem[1], **at_step(node))
