"""Reproducibility checks: what a step's cache key and its evidence cannot see.

A parameter that names data (a path that exists, a URL) is a hidden input (MP205); an
environment without a version (MP801), a label such as ``@latest`` on an environment or a
data asset (MP802) and an image tag without a digest (MP803) are moving references. Pure:
spec in, diagnostics out (MP205 asks only whether a path exists).
"""
from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

from mlpipe import codes
from mlpipe.checks.registry import check
from mlpipe.checks.where import at_pipeline, at_step, written_in
from mlpipe.diagnostics import Diagnostic, Severity
from mlpipe.graph import FromInput, FromLiteral, Graph, StepNode
from mlpipe.paths import display_path
from mlpipe.references import (
    as_written,
    data_reference_moves,
    environment_text,
    image_moves,
    is_url,
)
from mlpipe.spec import Environment, InputRole

_TRIVIAL = {"", ".", "..", os.sep, "~"}


def _names_data(value: Any) -> str | None:
    """What a parameter value names, when it names data: ``"an existing file"``, ``"a URL"``."""
    if not isinstance(value, str):
        return None
    text = value.strip()
    if text in _TRIVIAL or not any(ch.isalnum() for ch in text) or "\n" in text:
        return None
    if is_url(text):
        return "a URL" if "://" in text else "an Azure ML data asset"
    path = os.path.expanduser(text)
    try:
        if os.path.isdir(path):
            return "an existing folder"
        if os.path.exists(path):
            return "an existing file"
    except (OSError, ValueError):  # a value too long or with NUL is no path
        return None
    return None


def _bare_name(value: Any) -> bool:
    """A value with no folder and no file suffix (``"train"``), as opposed to a path."""
    text = str(value).strip()
    return "/" not in text and os.sep not in text and "." not in text


def _param_values(graph: Graph, node: StepNode) -> Iterator[tuple[str, Any, str]]:
    """(parameter, value, where the value comes from) for each parameter of the step."""
    for param in node.component.params:
        endpoint = node.bindings.get(param.name)
        if isinstance(endpoint, FromLiteral):
            yield param.name, endpoint.value, "is given"
        elif isinstance(endpoint, FromInput):
            source = graph.input(endpoint.name)
            if source is not None and source.role is InputRole.PARAM and not source.required:
                yield (param.name, source.default,
                       f"gets the default of pipeline parameter {endpoint.name!r},")
        elif endpoint is None and not param.required:
            yield param.name, param.default, "defaults to"


#: Azure ML jobs whose parameters name their source and sink by design (a connection, a
#: table, a path on another system): moving data is what they do, and they run only on Azure ML.
_TRANSFER_KINDS = ("data_transfer", "import")


@check(codes.PARAM_NAMES_DATA)
def parameters_naming_data(graph: Graph) -> Iterator[Diagnostic]:
    for node in graph.step_nodes():
        if node.component.kind in _TRANSFER_KINDS:
            continue
        for name, value, how in _param_values(graph, node):
            what = _names_data(value)
            if what is None:
                continue
            if what.startswith("an existing") and _bare_name(value):
                # a bare word ("train", "test") that happens to name something in the folder
                # check runs in: a weak sign that the step reads it, said as such
                yield Diagnostic.of(
                    codes.PARAM_NAMES_DATA,
                    f"parameter '{node.id}.{name}' {how} {value!r}, which is also the name of "
                    f"{what} in the current folder: if the step reads it, its cache key and "
                    f"evidence do not cover that data", severity=Severity.INFO,
                    hint=f"if it is data, declare it as an input ({name}: Input['uri_"
                         f"{'folder' if what == 'an existing folder' else 'file'}'])",
                    **at_step(node, name))
                continue
            yield Diagnostic.of(
                codes.PARAM_NAMES_DATA,
                f"parameter '{node.id}.{name}' {how} {value!r}, {what}: data the step can read "
                f"that its cache key and evidence do not cover, so a change there goes unseen "
                f"and the step is reused with stale content",
                hint=f"declare it as an input ({name}: Input['uri_"
                     f"{'folder' if what == 'an existing folder' else 'file'}']) so its content "
                     f"is snapshotted, recorded and part of the reuse key",
                **at_step(node, name))


def _environments(graph: Graph) -> dict[Environment, list[StepNode]]:
    found: dict[Environment, list[StepNode]] = {}
    for node in graph.step_nodes():
        env = node.component.environment
        if env is not None:
            found.setdefault(as_written(env), []).append(node)
    return found


def _steps(nodes: list[StepNode]) -> str:
    names = [f"'{n.id}'" for n in nodes]
    if len(names) == 1:
        return f"step {names[0]}"
    more = f" and {len(names) - 3} more" if len(names) > 3 else ""
    return f"steps {', '.join(names[:3])}{more}"


def _yaml_file(nodes: list[StepNode]) -> str | None:
    """The YAML file that names the steps' environment (their component's file), or None for
    a pipeline written with mlpipe's decorators: the help is written in that file's terms."""
    for node in nodes:
        loc = node.component.location or node.location
        if loc is not None and written_in(node) == "yaml":
            return loc.file
    return None


def _sdk(nodes: list[StepNode], yaml_or_python: str, sdk: str) -> str:
    """The hint for an azure-ai-ml Python pipeline's steps, else the other one."""
    return sdk if any(written_in(n) == "sdk" for n in nodes) else yaml_or_python


def _pin_hint(pin: str, env: Environment, nodes: list[StepNode], yaml_file: str | None) -> str:
    """How to pin the environment, in the terms of the file or code that names it."""
    return _sdk(nodes, f"{pin} in {display_path(yaml_file)}: environment: "
                       f"{environment_text(env, 'N')} (az ml environment list --name "
                       f"{_short(env.name or '')} lists its versions)" if yaml_file else
                f'{pin}: Environment("{env.name}", version="N")',
                f'{pin} where the pipeline\'s code names it: environment='
                f'"{environment_text(env, "N")}"')


@check(codes.ENVIRONMENT_UNVERSIONED, codes.MOVING_REFERENCE, codes.IMAGE_TAG_WITHOUT_DIGEST)
def moving_environments(graph: Graph) -> Iterator[Diagnostic]:
    for env, nodes in _environments(graph).items():
        where = at_step(nodes[0])
        yaml_file = _yaml_file(nodes)
        # an inline environment without a name (an image, a conda file, a build context) is
        # registered by Azure ML under a hash of its content: its own text pins it
        if env.version is None and env.image is None and env.name:
            written = (env.name if env.name.startswith("azureml://") or not yaml_file
                       else f"azureml:{env.name}")
            yield Diagnostic.of(
                codes.ENVIRONMENT_UNVERSIONED,
                f"environment {written!r} of {_steps(nodes)} "
                f"{'names' if yaml_file else 'has'} no version: Azure ML resolves it as "
                f"{environment_text(env)}, whichever version is newest when the job is "
                f"submitted, so two runs of the same pipeline can use different software",
                hint=_pin_hint("pin it", env, nodes, yaml_file), **where)
        elif env.version is not None and (env.version.strip().lower() == "latest"
                                          or env.version.startswith("@")):
            label = env.version.lstrip("@")
            written = environment_text(env) if yaml_file else env.name
            yield Diagnostic.of(
                codes.MOVING_REFERENCE,
                f"environment {written!r} of {_steps(nodes)} is referenced by the label "
                f"{label!r}, which names whichever version carries it when the job is "
                f"submitted" if env.version.startswith("@") or not yaml_file else
                f"environment {written!r} of {_steps(nodes)} asks for version 'latest', which "
                f"names whichever version is newest when the job is submitted",
                hint=_pin_hint("pin a version", env, nodes, yaml_file), **where)
        if env.image:
            why = image_moves(env.image)
            if why is not None:
                which = f"environment {env.name!r}" if env.name else "the inline environment"
                bare = env.image.rsplit("@", 1)[0]
                yield Diagnostic.of(
                    codes.IMAGE_TAG_WITHOUT_DIGEST,
                    f"{which} of {_steps(nodes)} uses image {env.image!r}: "
                    f"{why}, so the same reference can mean other software later",
                    hint=(f"pin the image by digest in {display_path(yaml_file)}: image: "
                          f"{_untagged(bare)}@sha256:<digest> (docker buildx imagetools "
                          f"inspect {bare} shows it)" if yaml_file else
                          "pin the image by digest: NAME@sha256:<digest> (docker buildx "
                          "imagetools inspect NAME:TAG shows it)"), **where)


def _short(name: str) -> str:
    """An environment's own name, from a registry URI or an ARM id."""
    return name.rstrip("/").rsplit("/", 1)[-1]


def _untagged(image: str) -> str:
    head, _, last = image.rpartition("/")
    return f"{head}/{last.split(':', 1)[0]}" if head else last.split(":", 1)[0]


@check(codes.MOVING_REFERENCE)
def moving_data(graph: Graph) -> Iterator[Diagnostic]:
    for inp in graph.spec.inputs:
        if inp.role is InputRole.ARTIFACT and isinstance(inp.default, str):
            yield from _moving_data(f"pipeline input {inp.name!r} defaults to", inp.default,
                                    at_pipeline(graph, inp.name))
    for node in graph.step_nodes():
        for port in node.component.inputs:
            endpoint = node.bindings.get(port.name)
            if type(endpoint) is FromLiteral and isinstance(endpoint.value, str):
                yield from _moving_data(f"input '{node.id}.{port.name}' is bound to",
                                        endpoint.value, at_step(node, port.name))


def _moving_data(what: str, value: str, where: dict[str, Any]) -> Iterator[Diagnostic]:
    why = data_reference_moves(value)
    if why is not None:
        yield Diagnostic.of(codes.MOVING_REFERENCE, f"{what} {value!r}: {why}",
                            hint=_data_hint(value), **where)


def _data_hint(reference: str) -> str:
    if reference.startswith("azureml:") and not reference.startswith("azureml://"):
        name = reference[len("azureml:"):].split("@")[0].split(":")[0]
        return f"pin a version: azureml:{name}:N"
    return ("register the data as a versioned data asset and bind azureml:NAME:N, or pass a "
            "local copy (mlpipe snapshots local data by content)")
