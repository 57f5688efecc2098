"""Evaluation checks: is the evaluation population the reviewed one?

The guide: "keep the split definition explicit so the pipeline does not silently substitute a
newly generated evaluation population between candidates". An evaluation whose data comes
through a split made inside the run (MP414; a step that copies the parts an input already
holds, ``Path(rows) / "test"`` to output ``test``, cuts nothing), or that reads the very
artifact its model was trained on with nothing declaring which part each reads (MP416),
cannot show that. Judged from the graph only; what the steps really read is judged after the
run (MP702).
"""
from __future__ import annotations

import re
from collections.abc import Iterator

from mlpipe import codes
from mlpipe.artifacts import AssetType
from mlpipe.checks.flows import input_parts
from mlpipe.checks.registry import check
from mlpipe.checks.where import at_step
from mlpipe.contracts import MetricsReport, SplitManifest
from mlpipe.contracts.base import contract_label
from mlpipe.diagnostics import Diagnostic
from mlpipe.graph import Endpoint, FromInput, FromLiteral, FromStep, Graph, StepNode
from mlpipe.spec import PortSpec

_MODEL_KINDS = (AssetType.MLFLOW_MODEL, AssetType.CUSTOM_MODEL)
#: Output names that are one part of a split: a step producing one cuts the data set.
_SPLIT_PARTS = {"test", "val", "valid", "validation", "holdout", "held_out", "heldout", "eval",
                "evaluation", "test_set", "testset", "test_data", "val_data", "dev"}


def _is_model(port: PortSpec | None) -> bool:
    return port is not None and (port.kind in _MODEL_KINDS or _is_model_contract(port.contract))


def _is_model_contract(contract: object) -> bool:
    kind = getattr(contract, "kind", "") or ""
    return isinstance(kind, str) and kind.endswith("model")


def _model_endpoints(graph: Graph) -> set[Endpoint]:
    """What carries a model, whatever its port's kind: the candidate's model (a ``uri_folder``
    model is a model too) and every output declared as one."""
    found: set[Endpoint] = set()
    cand = graph.spec.candidate
    if cand is not None and cand.model:
        endpoint = graph.outputs.get(cand.model)
        if endpoint is not None:
            found.add(endpoint)
    for node in graph.step_nodes():
        for port in node.component.outputs:
            if _is_model(port):
                found.add(FromStep(node.id, port.name))
    return found


def _carries_model(graph: Graph, node: StepNode, port: PortSpec, models: set[Endpoint]) -> bool:
    return _is_model(port) or node.bindings.get(port.name) in models


def declares_splits(contract: object) -> bool:
    """Whether a contract says which split each of its examples is in: a split manifest, a
    folder laid out by split (``{split}``), a table with a split column, or any contract
    that says so itself (``declares_splits``)."""
    if contract is None or isinstance(contract, type):
        return False
    if isinstance(contract, SplitManifest):
        return True
    stated = getattr(contract, "declares_splits", None)
    if isinstance(stated, bool):
        return stated
    return bool(getattr(contract, "splits", None)) or "{split}" in str(
        getattr(contract, "layout", ""))


_declares_splits = declares_splits


def _is_split_input(port: PortSpec) -> bool:
    contract = port.contract
    if contract is SplitManifest or isinstance(contract, SplitManifest):
        return True
    return "split" in port.name.lower()


def _split_basis(node: StepNode) -> str | None:
    """What makes the step's outputs a split, as declared: a manifest, a contract that
    declares splits, or (the weakest) outputs named for split parts; None when nothing."""
    named = []
    for port in node.component.outputs:
        contract = port.contract
        if contract is SplitManifest or isinstance(contract, SplitManifest):
            return f"its output {port.name!r} is a split manifest"
        if contract is not None and _declares_splits(contract):
            return f"its output {port.name!r} declares splits ({contract_label(contract)})"
        if port.name.lower() in _SPLIT_PARTS:
            named.append(port.name)
    if named:
        return f"its output{'s' if len(named) > 1 else ''} {' and '.join(map(repr, named))} " \
               f"{'are' if len(named) > 1 else 'is'} named for split parts"
    return None


_TRAIN_PARTS = {"train", "training", "train_set", "train_data", "trainset"}


def _own_parts_of(graph: Graph, node: StepNode, seen: set[str],
                  models: set[Endpoint]) -> bool:
    """Whether a step whose outputs are named for split parts copies them from the folders of
    one input that already holds them (``Path(rows) / "test"`` for output ``test``), an input
    that no step of the run cut: the split is the snapshot's own, not one made in the run."""
    named = [p.name.lower() for p in node.component.outputs
             if p.name.lower() in _SPLIT_PARTS | _TRAIN_PARTS]
    if len(named) < 2:
        return False
    for port, parts in input_parts(node.component).items():
        folders = {part.lower() for part in parts}
        if all(name in folders or name.split("_")[0] in folders for name in named):
            source = node.bindings.get(port)
            if isinstance(source, FromInput) or (
                    isinstance(source, FromStep)
                    and _generated_split(graph, source, set(seen), models) is None):
                return True
    return False


def _defines_split(node: StepNode) -> bool:
    """The step's outputs are a split: a manifest, a folder laid out by split, or one part."""
    return _split_basis(node) is not None


def evaluation_steps(graph: Graph) -> list[StepNode]:
    """The steps whose result is an evaluation: the one producing the candidate's evaluation,
    and any producing a MetricsReport."""
    found: dict[str, StepNode] = {}
    cand = graph.spec.candidate
    if cand is not None and cand.evaluation:
        endpoint = graph.outputs.get(cand.evaluation)
        if isinstance(endpoint, FromStep) and endpoint.node in graph.steps:
            found[endpoint.node] = graph.steps[endpoint.node]
    for node in graph.step_nodes():
        if any(p.contract is MetricsReport or isinstance(p.contract, MetricsReport)
               for p in node.component.outputs):
            found.setdefault(node.id, node)
    return list(found.values())


def _generated_split(graph: Graph, endpoint: Endpoint | None, seen: set[str],
                     models: set[Endpoint] | None = None) -> StepNode | None:
    """The step upstream of ``endpoint`` (through data, not models) that cuts a split without
    a recorded split definition, if any."""
    if models is None:
        models = _model_endpoints(graph)
    if not isinstance(endpoint, FromStep) or endpoint.node not in graph.steps:
        return None
    if endpoint.node in seen or endpoint in models:
        return None  # a model carries no population
    seen.add(endpoint.node)
    node = graph.steps[endpoint.node]
    if _is_model(node.component.output(endpoint.port)):
        return None
    # a split definition, or data already laid out by split that the step carries on
    split_inputs = [p for p in node.component.inputs if _is_split_input(p)
                    or _declares_splits(p.contract)
                    or _declares_splits(_artifact_contract(graph, node.bindings.get(p.name)))]
    if _defines_split(node):
        recorded, origin = False, None
        for port in split_inputs:
            source = node.bindings.get(port.name)
            if isinstance(source, (FromInput, FromLiteral)):
                recorded = True
            elif isinstance(source, FromStep) and source.node in graph.steps:
                upstream = _generated_split(graph, source, set(seen), models)
                if upstream is None:
                    recorded = True  # a split definition passed on from a recorded one
                else:
                    origin = origin or upstream  # the step that made it up
        if not recorded and origin is None and _own_parts_of(graph, node, seen, models):
            recorded = True
        if not recorded:
            return origin or node
    for port in node.component.inputs:
        if _carries_model(graph, node, port, models):
            continue
        found = _generated_split(graph, node.bindings.get(port.name), seen, models)
        if found is not None:
            return found
    return None


@check(codes.EVALUATION_SPLIT_GENERATED)
def evaluation_split_source(graph: Graph) -> Iterator[Diagnostic]:
    models = _model_endpoints(graph)
    for ev in evaluation_steps(graph):
        for port in ev.component.inputs:
            if _carries_model(graph, ev, port, models):
                continue
            endpoint = ev.bindings.get(port.name)
            maker = _generated_split(graph, endpoint, set(), models)
            if maker is None:
                continue
            yield Diagnostic.of(
                codes.EVALUATION_SPLIT_GENERATED,
                f"evaluation step '{ev.id}' reads '{endpoint}' through step '{maker.id}': "
                f"{_split_basis(maker)}, but it is given no split definition (no split "
                f"manifest, no input whose contract declares splits), so the split is cut "
                f"inside the run and the next candidate may be evaluated on another population",
                hint=f"give '{maker.id}' the reviewed split as a pipeline input (e.g. split: "
                     f"Input[SplitManifest(...)]) and cut the data by it, or declare the split "
                     f"its input already has (Input[ImageFolder(layout='{{split}}/...')], a "
                     f"TabularSchema split column)",
                **at_step(ev, port.name))
            break


def _training_inputs(graph: Graph, ev: StepNode, models: set[Endpoint]
                     ) -> list[tuple[StepNode, str, Endpoint]]:
    """(training step, its data port, what that port is bound to) for each model ``ev`` reads."""
    found = []
    for port in ev.component.inputs:
        if not _carries_model(graph, ev, port, models):
            continue
        endpoint = ev.bindings.get(port.name)
        if not isinstance(endpoint, FromStep) or endpoint.node not in graph.steps:
            continue
        trainer = graph.steps[endpoint.node]
        for tport in trainer.component.inputs:
            if not _carries_model(graph, trainer, tport, models):
                found.append((trainer, tport.name, trainer.bindings.get(tport.name)))
    return found


#: Names of plain file inputs that describe the data rather than hold it.
_DESCRIPTIVE = re.compile(r"label|class|vocab|token|encod|schema|config|param|map|manifest|"
                          r"split|feature_names|stats|norm", re.I)


def _holds_examples(contracts: tuple[object, ...], port: PortSpec) -> bool:
    """Whether the shared artifact is a data set (not a label map, manifest or configuration):
    as its contracts say, else by its kind and, for a single file, its port's name."""
    stated = [getattr(c, "holds_examples", None) for c in contracts if c is not None]
    if False in stated:
        return False
    if True in stated:
        return True
    if port.kind is AssetType.URI_FILE:
        return _DESCRIPTIVE.search(port.name) is None
    return True


def _artifact_contract(graph: Graph, endpoint: Endpoint | None) -> object:
    if isinstance(endpoint, FromStep) and endpoint.node in graph.steps:
        port = graph.steps[endpoint.node].component.output(endpoint.port)
        return port.contract if port is not None else None
    if isinstance(endpoint, FromInput):
        declared = graph.input(endpoint.name)
        return declared.port.contract if declared is not None and declared.port else None
    return None


#: Parameter values that name a part of a data set.
_PART_WORDS = {"train", "training", "val", "valid", "validation", "dev", "test", "testing",
               "eval", "evaluation", "holdout", "heldout", "calibration"}


def _part(graph: Graph, node: StepNode) -> str | None:
    """The part of its data a step is told to read: a parameter naming a split or fold
    (``split="test"``), or whose value is a split name; its value as bound, else its
    default."""
    for param in node.component.params:
        endpoint = node.bindings.get(param.name)
        if isinstance(endpoint, FromLiteral):
            value = endpoint.value
        elif isinstance(endpoint, FromInput):
            declared = graph.input(endpoint.name)
            value = declared.default if declared is not None else None
        else:
            value = param.default
        if not isinstance(value, (str, int)) or isinstance(value, bool):
            continue
        text = str(value).strip().lower()
        if any(w in param.name.lower() for w in ("split", "fold", "part", "subset")) or \
                text in _PART_WORDS:
            return text
    return None


def _picks_parts(graph: Graph, ev: StepNode, trainer: StepNode) -> bool:
    """Both steps are told which part they read, and not the same one."""
    mine, theirs = _part(graph, ev), _part(graph, trainer)
    return mine is not None and theirs is not None and mine != theirs


@check(codes.EVALUATION_READS_TRAINING_ARTIFACT)
def evaluation_on_training_artifact(graph: Graph) -> Iterator[Diagnostic]:
    models = _model_endpoints(graph)
    for ev in evaluation_steps(graph):
        training = _training_inputs(graph, ev, models)
        for port in ev.component.inputs:
            if _carries_model(graph, ev, port, models):
                continue
            endpoint = ev.bindings.get(port.name)
            if not isinstance(endpoint, (FromStep, FromInput)):
                continue
            for trainer, tport, tendpoint in training:
                if tendpoint != endpoint:
                    continue
                read = trainer.component.input(tport)
                contracts = (_artifact_contract(graph, endpoint), port.contract,
                             None if read is None else read.contract)
                if any(_declares_splits(c) for c in contracts):
                    continue  # laid out or marked by split: each step reads its own part
                if _picks_parts(graph, ev, trainer):
                    continue  # each step is told which part it reads
                if not _holds_examples(contracts, port):
                    continue  # a label map, a manifest, a configuration: shared on purpose
                yield Diagnostic.of(
                    codes.EVALUATION_READS_TRAINING_ARTIFACT,
                    f"evaluation step '{ev.id}' reads '{endpoint}' as {port.name!r}, the same "
                    f"artifact step '{trainer.id}' trains on as {tport!r}, and no contract "
                    f"declares splits that would keep their examples apart",
                    hint=f"feed '{ev.id}.{port.name}' a held-out artifact (the test part of a "
                         f"recorded split), or declare the artifact's splits in its contract "
                         f"(ImageFolder(layout='{{split}}/...'), a TabularSchema column with "
                         f"role='split'), or a SplitManifest",
                    **at_step(ev, port.name))
                break
