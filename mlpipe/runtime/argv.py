"""The command line of an exported step, read inside the step (``python -m mlpipe.runtime.step
--component MOD:FN --input NAME=PATH ... --output ... --param ... --record DIR``), and typed
parameter values.

Written by ``mlpipe.backends.azure.command.runtime_command``; sees only errors and spec.
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Any, NoReturn

from mlpipe.errors import UsageError
from mlpipe.spec import ParamSpec, ParamType

RUNTIME_MODULE = "mlpipe.runtime.step"


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
    record: str | None = None


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # argparse would exit; the runtime wants an error
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
    parser.add_argument("--record")
    for flag in ("input", "output", "param"):
        parser.add_argument(f"--{flag}", action="append", default=[])
    ns = parser.parse_args(argv)
    return StepArgs(ns.component, ns.digest, _pairs(ns.input, "--input"),
                    _pairs(ns.output, "--output"), _pairs(ns.param, "--param"), ns.record)


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
    by_text = {} if spec.enum_class is None else {str(m.value): m for m in spec.enum_class}
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
            return by_text[text]
    except (ValueError, KeyError):
        wanted = ("one of " + ", ".join(by_text) if spec.type is ParamType.ENUM
                  else "a " + spec.type.value)
        raise UsageError(f"parameter {spec.name!r} was given {text!r}, which is not {wanted}",
                         hint="pass a value of the parameter's type") from None
    return text
