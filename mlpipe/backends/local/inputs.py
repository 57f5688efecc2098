"""Turning ``--input name=PATH`` and ``--param name=VALUE`` into checked pipeline values.

Parsing and validation against the pipeline spec, and the given data checked against the
contracts its consumers require, before anything runs; snapshots are the executor's job.
"""
from __future__ import annotations

import enum
import json
import os
import stat
from typing import Any

from mlpipe.contracts import Contract, contract_label, contract_spec, validate
from mlpipe.errors import ContractError, UsageError, with_article
from mlpipe.graph import FromInput, FromLiteral, Graph
from mlpipe.params import check_value
from mlpipe.paths import cloud_reference
from mlpipe.runtime.argv import coerce_param
from mlpipe.secret import Secret
from mlpipe.spec import (
    InputRole,
    ParamSpec,
    ParamType,
    PipelineInputSpec,
    PipelineSpec,
    plain_value,
)


def _on_this_machine(what: str, path: str, download: str) -> None:
    """Refuse a path that names no file or folder on this machine (``what`` names the input in
    the message; ``download`` is the hint for a cloud reference).

    Raises:
        UsageError: ``path`` is a cloud reference, or nothing exists there.
    """
    remote = cloud_reference(path)
    if remote is not None:
        raise UsageError(f"{what}: {path} is {remote}, not a file or folder on this machine",
                         hint=download)
    if not os.path.exists(path):
        raise UsageError(f"{what}: no such file or folder: {path}",
                         hint="give the path of an existing file or folder")


def split_assignments(pairs: tuple[str, ...] | list[str], option: str) -> dict[str, str]:
    """``["a=1", "b=x"]`` -> ``{"a": "1", "b": "x"}``; a pair without ``=`` is an error."""
    out: dict[str, str] = {}
    wanted, example = (("NAME=ENV_VAR", "name=ENV_VAR") if option == "--secret"
                       else ("NAME=VALUE", "name=value"))
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            # a --secret's text is not repeated: it may be the secret itself
            shown = "one of them" if option == "--secret" else repr(pair)
            raise UsageError(f"{option} {shown} is not {wanted}",
                             hint=f"write {option} {example}")
        if name.strip() in out:  # the values are not repeated: one may be a secret
            raise UsageError(f"{option} {name.strip()} is given twice",
                             hint=f"give {option} {name.strip()}=... once")
        out[name.strip()] = value
    return out


def _parse(text: Any, param: ParamSpec | None) -> Any:
    """A ``--param`` text as the typed value its declaration asks for; the text itself when it
    is not one (``check_value`` then says what is wrong with it)."""
    if not isinstance(text, str):
        return text
    if param is None:
        try:
            return json.loads(text)
        except ValueError:
            return text
    try:
        value = coerce_param(param, text)
    except UsageError:
        if param.type in (ParamType.INT, ParamType.FLOAT, ParamType.BOOL):
            raise UsageError(f"{text!r} is not {with_article(param.type.value)}",
                             hint="give a value that fits the parameter's declaration") from None
        return text  # an enum or choice: check_value names the allowed values
    return value.value if isinstance(value, enum.Enum) else value


def _names(spec: PipelineSpec, role: InputRole) -> str:
    return ", ".join(i.name for i in spec.inputs if i.role is role) or "none"


def _declared(spec: PipelineSpec, name: str, role: InputRole,
              instead: str) -> PipelineInputSpec:
    """The pipeline input ``name`` given as a ``role``; refused when the pipeline has none, or
    has it in the other role (``instead`` is how to pass it then)."""
    what, option, other = (("input", "--input", "parameter") if role is InputRole.ARTIFACT
                           else ("parameter", "--param", "input"))
    declared = spec.input(name)
    if declared is None:
        raise UsageError(f"pipeline {spec.name!r} has no {what} {name!r} "
                         f"({what}s: {_names(spec, role)})",
                         hint=f"use {option} with one of those names")
    if declared.role is not role:
        raise UsageError(f"{name!r} is {with_article(other)} of pipeline {spec.name!r}, not "
                         f"{with_article(what)}", hint=f"pass it as {instead}")
    return declared


def resolve(spec: PipelineSpec, inputs: dict[str, str], params: dict[str, Any]
            ) -> tuple[dict[str, str], dict[str, Any]]:
    """Check the given values against the pipeline's inputs and fill in defaults.

    Returns:
        ``(artifact inputs name -> absolute path, params name -> value)``.

    Raises:
        UsageError: an unknown name, a parameter given as an input (or the reverse), a
            missing required input, a path that does not exist, or a bad parameter value.
    """
    paths: dict[str, str] = {}
    for name, path in inputs.items():
        declared = _declared(spec, name, InputRole.ARTIFACT, f"--secret {name}=ENV_VAR"
                             if (d := spec.input(name)) is not None and d.secret
                             else f"--param {name}={path}")
        _on_this_machine(f"input {name!r}", path, f"run it on Azure ML with --target azure, "
                                                  f"or download a copy and pass --input "
                                                  f"{name}=PATH")
        readable(f"input {name!r}", path, declared.kind)
        paths[name] = os.path.abspath(path)
    values: dict[str, Any] = {}
    for name, text in params.items():
        declared = _declared(spec, name, InputRole.PARAM, f"--input {name}=PATH")
        is_secret = declared.secret
        if isinstance(text, Secret) and not is_secret:
            kind = declared.param.type.value if declared.param is not None else "not declared"
            raise UsageError(f"--secret {name}: parameter {name!r} of pipeline {spec.name!r} is "
                             f"not a Secret ({kind}); its value would be recorded in clear",
                             hint=f"declare it Param[Secret] if it is one, else pass it with "
                                  f"--param {name}=VALUE")
        shown = "--secret " + name if isinstance(text, Secret) else (
            f"--param {name}=***" if is_secret else f"--param {name}={text}")
        try:
            value = _parse(text, declared.param)
        except UsageError as err:
            raise UsageError(f"{shown}: {err.message}", hint=err.hint) from None
        if declared.param is not None:
            problem = check_value(declared.param, value)
            if problem is not None:
                raise UsageError(f"{shown}: {problem.message}",
                                 hint="give a value that fits the parameter's declaration")
        values[name] = value if is_secret else plain_value(value)
    for declared in spec.inputs:
        if declared.name in paths or declared.name in values:
            continue
        if declared.required:
            option, what = (("--input", "PATH") if declared.role is InputRole.ARTIFACT else
                            ("--secret", "ENV_VAR") if declared.secret else ("--param", "VALUE"))
            raise UsageError(f"pipeline {spec.name!r} needs {option} {declared.name}=...",
                             hint=f"pass {option} {declared.name}={what}")
        if declared.role is InputRole.PARAM:
            values[declared.name] = plain_value(declared.default)
        elif declared.default is not None:
            paths[declared.name] = local_path(
                declared.default, declared.base, f"input {declared.name!r} defaults to",
                f"--input {declared.name}=PATH")
            readable(f"input {declared.name!r}", paths[declared.name], declared.kind)
    return paths, values


def local_path(value: Any, base: str | None, what: str, option: str) -> str:
    """The absolute local path of a data path written in a pipeline: relative to ``base`` (the
    folder of the YAML file it was read from; None: the current directory).

    Raises:
        UsageError: the value is a cloud reference (an Azure ML data asset or datastore path, a
            web or storage URL), which is no file here, or the path does not exist; the hint
            names ``option``, which gives a local copy instead.
    """
    text = os.fspath(value) if isinstance(value, (str, os.PathLike)) else str(value)
    remote = cloud_reference(text)
    if remote is not None:
        raise UsageError(f"{what} {text}, which is {remote}, not a file or folder on this "
                         f"machine", hint=f"download a copy and pass {option} to run it here, "
                                          f"or run it on Azure ML with --target azure")
    path = os.path.abspath(os.path.join(base, text) if base else text)
    if not os.path.exists(path):
        raise UsageError(f"{what} {path}, which does not exist",
                         hint=f"pass {option}, or fix the path in the pipeline")
    return path


def split_step_inputs(inputs: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """``--input`` values as ``(pipeline input -> path, "STEP.PORT" -> path)``: a name with a
    dot names a step's input (a nested step's id has dots too: the port is after the last)."""
    plain = {k: v for k, v in inputs.items() if "." not in k}
    return plain, {k: v for k, v in inputs.items() if "." in k}


def literal_paths(graph: Graph, overrides: dict[str, str]) -> dict[tuple[str, str], str]:
    """Each step input bound to a data path written in the pipeline -> the absolute local path
    it reads: ``--input STEP.PORT=PATH`` when given, else the path resolved against the folder
    of the YAML file it was read from (a path in Python code: the current directory).

    Checked before anything runs, so a run never starts to fail at its third step.

    Raises:
        UsageError: an override names no step or no data input of it, or an input that is not
            bound to a path in the pipeline; a path is a cloud reference or does not exist.
    """
    given = dict(overrides)
    for key, path in given.items():
        step_id, _, port_name = key.rpartition(".")
        node = graph.steps.get(step_id)
        if node is None:
            raise UsageError(f"--input {key}: pipeline {graph.spec.name!r} has no step "
                             f"{step_id!r} (steps: {', '.join(graph.steps)})",
                             hint="give --input STEP.PORT=PATH with one of those steps, or "
                                  "--input NAME=PATH for a pipeline input")
        port = node.component.input(port_name)
        if port is None:
            names = ", ".join(p.name for p in node.component.inputs) or "none"
            raise UsageError(f"--input {key}: step {step_id!r} has no data input "
                             f"{port_name!r} (data inputs: {names})",
                             hint="give one of those names; parameters are set with --param")
        endpoint = node.bindings.get(port_name)
        if not isinstance(endpoint, FromLiteral):
            where = f"reads {endpoint}" if endpoint is not None else "is not bound"
            raise UsageError(f"--input {key}: step {step_id!r} input {port_name!r} {where}, "
                             f"not a path written in the pipeline",
                             hint="--input STEP.PORT replaces a path written in the pipeline; "
                                  "give a pipeline input as --input NAME=PATH")
        _on_this_machine(f"--input {key}", path, f"download a copy and pass --input {key}=PATH")
    found: dict[tuple[str, str], str] = {}
    for node in graph.step_nodes():
        for port in node.component.inputs:
            endpoint = node.bindings.get(port.name)
            if not isinstance(endpoint, FromLiteral) or endpoint.value is None:
                continue
            key = f"{node.id}.{port.name}"
            if key in given:
                found[(node.id, port.name)] = os.path.abspath(given[key])
            else:
                found[(node.id, port.name)] = local_path(
                    endpoint.value, endpoint.base, f"step {node.id!r} input {port.name!r} is "
                    f"bound to", f"--input {key}=PATH")
            readable(f"step {node.id!r} input {port.name!r}", found[(node.id, port.name)],
                     port.kind)
    return found


_SPECIAL = ((stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISCHR, "a character device"),
            (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def readable(label: str, path: str, kind: Any = None) -> None:
    """Refuse an input path a step cannot read as data: a FIFO, device or socket (reading one
    would wait, or never end), a folder where a ``uri_file`` is declared, a file or folder
    that cannot be opened.

    Raises:
        UsageError: saying which, and what to give instead.
    """
    from mlpipe.artifacts import AssetType

    try:
        st = os.stat(path)
    except OSError as exc:
        raise UsageError(f"{label}: {path} cannot be read ({exc.strerror})",
                         hint="give the path of an existing, readable file or folder") from None
    for test, what in _SPECIAL:
        if test(st.st_mode):
            raise UsageError(f"{label}: {path} is {what}, not a file or folder",
                             hint="copy the data into a regular file and give that")
    folder = stat.S_ISDIR(st.st_mode)
    if folder and kind is AssetType.URI_FILE:
        raise UsageError(f"{label}: {path} is a folder, but it is declared a uri_file",
                         hint="give one file, or declare the port Input['uri_folder']")
    try:
        if folder:
            os.scandir(path).close()
        else:
            os.close(os.open(path, os.O_RDONLY | os.O_NONBLOCK))
    except OSError as exc:
        raise UsageError(f"{label}: {path} cannot be read ({exc.strerror})",
                         hint="make it readable (chmod u+r), or give another path") from None


def input_contracts(graph: Graph) -> dict[str, list[tuple[str, Contract | type[Contract]]]]:
    """Pipeline input -> the contracts its data must meet: its own declared one, and each of
    the step ports it is bound to (as ``"step.port"``), in graph order."""
    found: dict[str, list[tuple[str, Contract | type[Contract]]]] = {}
    for inp in graph.spec.inputs:
        if inp.role is InputRole.ARTIFACT and inp.port is not None and inp.port.contract:
            found.setdefault(inp.name, []).append((f"pipeline input {inp.name!r}",
                                                   inp.port.contract))
    for node in graph.step_nodes():
        for port in node.component.inputs:
            endpoint = node.bindings.get(port.name)
            if isinstance(endpoint, FromInput) and port.contract is not None:
                found.setdefault(endpoint.name, []).append((f"'{node.id}.{port.name}'",
                                                            port.contract))
    return found


def check_input_contracts(graph: Graph, paths: dict[str, str]) -> None:
    """Validate each given pipeline input against every contract it must meet, before any
    step runs (a wrong-unit table fails here, not in a step with a KeyError).

    Raises:
        ContractError: the data does not match; the message names the input, the port that
            requires the contract, and the file, row or column at fault.
    """
    for name, wanted in input_contracts(graph).items():
        path = paths.get(name)
        if path is None:
            continue
        seen: set[str] = set()
        for who, contract in wanted:
            key = repr(contract_spec(contract))
            if key in seen:
                continue
            seen.add(key)
            try:
                validate(contract, path)
            except ContractError as err:
                raise ContractError(
                    f"input {name!r} ({path}) does not match {contract_label(contract)}, which "
                    f"{who} requires: {err.message}",
                    hint=f"{err.hint}; or give --input {name}= another file" if err.hint
                    else f"give --input {name}= data that matches the contract",
                    file=err.file, line=err.line, column=err.column, key=err.key) from None
