"""The command an exported function component runs on Azure ML, and how to read it back.

A function component's body runs through mlpipe's step runtime inside the component's
environment (which must therefore have mlpipe installed)::

    python -m mlpipe.runtime.step --component MODULE:QUALNAME --digest SHA256
        --input NAME=PATH ... --output NAME=PATH ... --param NAME=VALUE ...

Azure ML substitutes ``${{inputs.X}}``/``${{outputs.X}}`` before the command starts; an
optional input or parameter sits in ``$[[...]]`` so Azure ML drops it when it is not given.
``parse_step_argv`` is the reference reader of this form for the runtime (issue 4 owns
``mlpipe.runtime.step``). Nothing here imports azure-ai-ml.
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Any

from mlpipe.errors import UsageError
from mlpipe.spec import ComponentSpec, ParamSpec, ParamType

RUNTIME_MODULE = "mlpipe.runtime.step"


def runtime_command(spec: ComponentSpec) -> str:
    """The ``command:`` of a function component's exported YAML.

    Args:
        spec: a component declared with ``@component`` (``spec.function`` is set).

    Returns:
        One line; every input, output and parameter passed by name.

    Example:
        >>> runtime_command(prepare.spec)[:62]
        'python -m mlpipe.runtime.step --component components.defect:p'
    """
    parts = [f"python -m {RUNTIME_MODULE} --component {spec.function} --digest {spec.digest}"]
    for port in spec.inputs:
        parts.append(_optional(f'--input "{port.name}=${{{{inputs.{port.name}}}}}"', port.optional))
    for port in spec.outputs:
        parts.append(f'--output "{port.name}=${{{{outputs.{port.name}}}}}"')
    for param in spec.params:
        optional = not param.required and param.default is None
        parts.append(_optional(f'--param "{param.name}=${{{{inputs.{param.name}}}}}"', optional))
    return " ".join(parts)


def _optional(text: str, optional: bool) -> str:
    return f"$[[{text}]]" if optional else text


@dataclass(frozen=True, slots=True)
class StepArgs:
    """What an exported step's command line says: the component and its values by name.

    Parameter values are the text Azure ML substituted; ``coerce_param`` turns one into the
    typed value its ParamSpec declares.
    """

    component: str
    digest: str | None
    inputs: dict[str, str] = field(default_factory=dict)
    outputs: dict[str, str] = field(default_factory=dict)
    params: dict[str, str] = field(default_factory=dict)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse would exit; the runtime wants an error
        raise UsageError(f"mlpipe.runtime.step arguments: {message}",
                         hint="the command is written by `mlpipe compile`; re-export it")


def parse_step_argv(argv: list[str]) -> StepArgs:
    """Read the arguments of an exported step command (after ``-m mlpipe.runtime.step``).

    Raises:
        UsageError: an argument is missing or not ``NAME=VALUE``.

    Example:
        >>> parse_step_argv(["--component", "m:f", "--param", "seed=13"]).params
        {'seed': '13'}
    """
    parser = _Parser(prog=RUNTIME_MODULE, add_help=False)
    parser.add_argument("--component", required=True)
    parser.add_argument("--digest")
    for flag in ("input", "output", "param"):
        parser.add_argument(f"--{flag}", action="append", default=[])
    ns = parser.parse_args(argv)
    return StepArgs(ns.component, ns.digest, _pairs(ns.input, "--input"),
                    _pairs(ns.output, "--output"), _pairs(ns.param, "--param"))


def _pairs(items: list[str], flag: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.isidentifier():
            raise UsageError(f"mlpipe.runtime.step arguments: {flag} {item!r} is not NAME=VALUE",
                             hint="the command is written by `mlpipe compile`; re-export it")
        out[name] = value
    return out


_TRUE, _FALSE = {"true", "1", "yes"}, {"false", "0", "no"}


def coerce_param(spec: ParamSpec, text: str) -> Any:
    """The typed value of parameter ``spec`` from the text Azure ML substituted.

    Raises:
        UsageError: the text is not a value of the parameter's type.

    Example:
        >>> coerce_param(ParamSpec("epochs", ParamType.INT), "10")
        10
    """
    try:
        if spec.type is ParamType.INT:
            return int(text)
        if spec.type is ParamType.FLOAT:
            return float(text)
        if spec.type is ParamType.BOOL:
            if text.lower() in _TRUE | _FALSE:
                return text.lower() in _TRUE
            raise ValueError(text)
        if spec.type is ParamType.ENUM and spec.enum_class is not None:
            by_text = {str(m.value): m for m in spec.enum_class}
            return by_text[text]
    except (ValueError, KeyError):
        raise UsageError(f"parameter {spec.name!r} was given {text!r}, which is not "
                         f"{'one of ' + ', '.join(by_text) if spec.type is ParamType.ENUM else 'a ' + spec.type.value}",
                         hint="pass a value of the parameter's type") from None
    return text


__all__ = ["RUNTIME_MODULE", "StepArgs", "coerce_param", "parse_step_argv", "runtime_command"]
