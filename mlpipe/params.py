"""Judging a parameter value against its ParamSpec: type, range, choices.

Shared by the signature reader (defaults), the checks (bound values) and the executors.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from mlpipe.errors import with_article
from mlpipe.spec import ParamSpec, ParamType

_PYTHON_TYPES: dict[ParamType, tuple[type, ...]] = {
    ParamType.INT: (int,),
    ParamType.FLOAT: (int, float),
    ParamType.STR: (str,),
    ParamType.BOOL: (bool,),
}


@dataclass(frozen=True, slots=True)
class ValueProblem:
    """Why a value does not fit a parameter. ``kind`` is ``type``, ``range`` or ``choices``."""

    kind: str
    message: str


def param_type_of(python_type: type) -> ParamType:
    if isinstance(python_type, type) and issubclass(python_type, enum.Enum):
        return ParamType.ENUM
    return ParamType(python_type.__name__)


def describe_constraint(spec: ParamSpec) -> str:
    if spec.choices is not None:
        return "one of " + ", ".join(repr(c) for c in spec.choices)
    lo = "" if spec.minimum is None else spec.minimum
    hi = "" if spec.maximum is None else spec.maximum
    return f"in {lo}:{hi}"


def check_value(spec: ParamSpec, value: Any) -> ValueProblem | None:
    """The first thing wrong with ``value`` for ``spec``, or None when it fits.

    Example:
        >>> check_value(ParamSpec("epochs", ParamType.INT, maximum=200), 500).kind
        'range'
    """
    if spec.type is ParamType.ENUM:
        if isinstance(value, enum.Enum):
            if spec.enum_class is not None and not isinstance(value, spec.enum_class):
                return ValueProblem("type", f"{value!r} is not a member of "
                                            f"{spec.enum_class.__name__}")
            value = value.value
        if value not in spec.choices:
            return ValueProblem("choices", f"{value!r} is not {describe_constraint(spec)}")
        return None
    allowed = _PYTHON_TYPES[spec.type]
    if ((isinstance(value, bool) and spec.type is not ParamType.BOOL)
            or not isinstance(value, allowed)):
        return ValueProblem("type", f"{value!r} is {with_article(type(value).__name__)}, "
                                    f"not {with_article(spec.type.value)}")
    if spec.choices is not None and value not in spec.choices:
        return ValueProblem("choices", f"{value!r} is not {describe_constraint(spec)}")
    if (spec.minimum is not None and value < spec.minimum) or (
            spec.maximum is not None and value > spec.maximum):
        return ValueProblem("range", f"{value!r} is not {describe_constraint(spec)}")
    return None
