"""What each kind of Azure ML pipeline job binds: its data and parameter bindings by field,
and the interface a job implies when no component file states it (an inline command job, a
registered component, an AutoML or control-flow node).

Reads plain YAML values; builds spec values; never judges (the checks do) and never imports
azure-ai-ml.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mlpipe.artifacts import AssetType
from mlpipe.backends.azure import vocabulary
from mlpipe.backends.azure.jobkinds import job_kind_named
from mlpipe.spec import InputRole, ParamSpec, ParamType, PipelineInputSpec, PortSpec

_EXPR = re.compile(r"^\$\{\{\s*(?P<body>[^}]*?)\s*\}\}$")
PARENT_INPUT = re.compile(r"^parent\.inputs\.(?P<name>[A-Za-z_][\w]*)$")
SIBLING_OUTPUT = re.compile(
    r"^parent\.jobs\.(?P<job>[A-Za-z_][\w-]*)\.outputs\.(?P<port>[A-Za-z_][\w]*)$")
SIBLING_JOB = re.compile(r"^parent\.jobs\.(?P<job>[A-Za-z_][\w-]*)$")
PARENT_OUTPUT = re.compile(r"^parent\.outputs\.(?P<name>[A-Za-z_][\w]*)$")
_COMMAND_REF = re.compile(r"\$\{\{\s*(inputs|outputs)\.([A-Za-z_]\w*)\s*\}\}")

#: AutoML's data fields: each is an input of the node (an MLTable).
AUTOML_DATA = ("training_data", "validation_data", "test_data")
#: Fields of a data transfer or import job's ``source``/``sink`` that may bind a value.
TRANSFER_FIELDS = ("path", "query", "connection", "table_name", "stored_procedure")


def expression(value: Any) -> str | None:
    """The body of a value that is one whole ``${{...}}`` expression, else None."""
    if isinstance(value, str):
        m = _EXPR.match(value.strip())
        if m:
            return m["body"]
    return None


def optional_names(command: str) -> set[str]:
    """Inputs a command names only inside ``$[[...]]`` blocks (optional for Azure ML)."""
    return {m.group(1) for block in re.findall(r"\$\[\[(.*?)\]\]", command, re.S)
            for m in re.finditer(r"\$\{\{\s*inputs\.([A-Za-z_]\w*)\s*\}\}", block)}


@dataclass(slots=True)
class Given:
    """One value a job gives one of its inputs: where it comes from, as YAML wrote it."""

    key: str
    raw: Any          # the value as written (an expression, a literal, a mapping)
    value: Any        # the expression or literal inside a {path:}/{value:} mapping
    declared: str | None = None   # a type the job states for it (``{type: uri_file, ...}``)


def given_inputs(node: Any, kind: str) -> list[tuple[Any, str, Given]]:
    """Every input value the job of ``kind`` gives, as ``(the mapping holding it, the key in
    that mapping, Given)``; the key in ``Given`` is the binding's name in the spec."""
    found: list[tuple[Any, str, Given]] = []
    declared = node.get("inputs") if isinstance(node.get("inputs"), dict) else {}
    for key in declared:
        found.append((declared, key, _given(key, declared[key])))
    entry = job_kind_named(kind)
    if entry is not None and entry.binds_more:
        found += BOUND_VALUES[entry.name](node)
    return found


def automl_data(node: Any) -> list[tuple[Any, str, Given]]:
    """What an AutoML job binds beside its inputs: its training, validation and test data."""
    return [(node, key, _given(key, node[key])) for key in AUTOML_DATA
            if node.get(key) is not None]


def transfer_ends(node: Any) -> list[tuple[Any, str, Given]]:
    """What a data transfer or import job binds in its ``source`` and ``sink``: each field
    given as an expression (``${{parent.inputs.X}}``), as ``source.path`` and the like."""
    found: list[tuple[Any, str, Given]] = []
    for part in ("source", "sink"):
        block = node.get(part)
        if isinstance(block, dict):
            for key in TRANSFER_FIELDS:
                if key in block and expression(block[key]) is not None:
                    found.append((block, key, Given(f"{part}.{key}", block[key],
                                                    block[key], "string")))
    return found


def control_values(node: Any) -> list[tuple[Any, str, Given]]:
    """What a control-flow node binds: its ``condition`` (a boolean) and ``items``."""
    return [(node, key, Given(key, node[key], node[key],
                              "boolean" if key == "condition" else None))
            for key in ("condition", "items") if key in node]


def _given(key: str, raw: Any) -> Given:
    if isinstance(raw, dict):
        value = raw.get("path", raw.get("value"))
        return Given(key, raw, value, raw.get("type"))
    return Given(key, raw, raw)


@dataclass(slots=True)
class Interface:
    """The ports and parameters a job implies by what it binds (no component states them)."""

    inputs: dict[str, PortSpec] = field(default_factory=dict)
    params: dict[str, ParamSpec] = field(default_factory=dict)
    outputs: dict[str, PortSpec] = field(default_factory=dict)
    #: input name -> (sibling job, its output): the port's kind is that output's, once known
    from_siblings: dict[str, tuple[str, str]] = field(default_factory=dict)


def implied_interface(given: list[Given], node_outputs: Any, command: str | None,
                      pipeline_inputs: dict[str, PipelineInputSpec],
                      output_types: dict[str, AssetType]) -> Interface:
    """The interface of a job whose component does not state one: an input per value it
    binds (a parameter for a value or a parameter pipeline input, a port for data), an output
    per output it names, and the ``${{inputs.X}}``/``${{outputs.X}}`` its command uses."""
    iface = Interface()
    optional = optional_names(command or "")
    for g in given:
        body = expression(g.value)
        parent = PARENT_INPUT.match(body or "")
        sibling = SIBLING_OUTPUT.match(body or "")
        source = pipeline_inputs.get(parent["name"]) if parent else None
        if g.declared in vocabulary.ASSET_TYPES:
            iface.inputs[g.key] = PortSpec(g.key, vocabulary.ASSET_TYPES[g.declared],
                                           optional=g.key in optional)
        elif g.declared in vocabulary.AZURE_PARAM_TYPES and body is None:
            iface.params[g.key] = ParamSpec(g.key, vocabulary.AZURE_PARAM_TYPES[g.declared],
                                            required=False)
        elif source is not None and source.role is InputRole.PARAM:
            ptype = source.param.type if source.param else ParamType.STR
            iface.params[g.key] = ParamSpec(g.key, ptype, required=True)
        elif source is not None:
            iface.inputs[g.key] = PortSpec(g.key, source.kind or AssetType.URI_FOLDER,
                                           optional=g.key in optional)
        elif sibling is not None:
            iface.inputs[g.key] = PortSpec(g.key, AssetType.URI_FOLDER, optional=g.key in optional)
            iface.from_siblings[g.key] = (sibling["job"], sibling["port"])
        elif body is not None:  # an expression mlpipe cannot follow (MP601 says so)
            iface.params[g.key] = ParamSpec(g.key, ParamType.STR, required=False)
        elif isinstance(g.value, (bool, int, float, str)):
            iface.params[g.key] = ParamSpec(
                g.key, vocabulary.LITERAL_PARAM_TYPES[type(g.value)], required=True)
        elif g.value is None and g.declared is None:
            iface.inputs[g.key] = PortSpec(g.key, AssetType.URI_FOLDER, optional=True)
        else:  # a list or mapping value (parallel_for items): a parameter as written
            iface.params[g.key] = ParamSpec(g.key, ParamType.STR, required=False)
    for key in node_outputs or {}:
        value = node_outputs[key]
        typed = value.get("type") if isinstance(value, dict) else None
        body = expression(value.get("path") if isinstance(value, dict) else value) or ""
        m = PARENT_OUTPUT.match(body)
        kind = ((vocabulary.ASSET_TYPES.get(typed) if typed is not None else None)
                or (output_types.get(m["name"]) if m else None) or AssetType.URI_FOLDER)
        iface.outputs[key] = PortSpec(key, kind)
    for direction, ref in _COMMAND_REF.findall(command or ""):
        if direction == "outputs" and ref not in iface.outputs:
            iface.outputs[ref] = PortSpec(ref, AssetType.URI_FOLDER)
        elif direction == "inputs" and ref not in iface.inputs and ref not in iface.params:
            iface.inputs[ref] = PortSpec(ref, AssetType.URI_FOLDER, optional=ref in optional)
    return iface


#: What a job of each kind binds beyond ``inputs:`` (the kinds the table marks ``binds_more``).
BOUND_VALUES: dict[str, Callable[[Any], list[tuple[Any, str, Given]]]] = {
    "automl": automl_data, "data_transfer": transfer_ends, "import": transfer_ends,
    "if_else": control_values, "do_while": control_values, "parallel_for": control_values,
}

__all__ = ["AUTOML_DATA", "PARENT_INPUT", "PARENT_OUTPUT", "SIBLING_JOB", "SIBLING_OUTPUT",
           "TRANSFER_FIELDS", "Given", "Interface", "expression", "given_inputs",
           "implied_interface", "optional_names"]
