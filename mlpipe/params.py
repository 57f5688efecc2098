"""Judging a parameter value against its ParamSpec: type, range, choices.

Shared by the signature reader (defaults), the checks (bound values) and the executors.
"""
from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import Any

from mlpipe.errors import with_article
from mlpipe.secret import Secret
from mlpipe.spec import ParamSpec, ParamType

_PYTHON_TYPES: dict[ParamType, tuple[type, ...]] = {
    ParamType.INT: (int,),
    ParamType.FLOAT: (int, float),
    ParamType.STR: (str,),
    ParamType.BOOL: (bool,),
    ParamType.SECRET: (str,),
}


@dataclass(frozen=True, slots=True)
class ValueProblem:
    """Why a value does not fit a parameter. ``kind`` is ``type``, ``range`` or ``choices``."""

    kind: str
    message: str


def param_type_of(python_type: type) -> ParamType:
    if isinstance(python_type, type) and issubclass(python_type, enum.Enum):
        return ParamType.ENUM
    if python_type is Secret:
        return ParamType.SECRET
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
    if spec.type is ParamType.SECRET:  # never quoted: the message is printed and recorded
        if isinstance(value, str):
            return None
        return ValueProblem("type", f"a secret is given as text, not as "
                                    f"{with_article(type(value).__name__)}")
    if ((isinstance(value, bool) and spec.type is not ParamType.BOOL)
            or not isinstance(value, allowed)):
        return ValueProblem("type", f"{value!r} is {with_article(type(value).__name__)}, "
                                    f"not {with_article(spec.type.value)}")
    if isinstance(value, float) and not math.isfinite(value):
        # NaN compares false with every bound, and neither it nor infinity is valid JSON
        return ValueProblem("range", f"{value!r} is not a finite number")
    if spec.choices is not None and value not in spec.choices:
        return ValueProblem("choices", f"{value!r} is not {describe_constraint(spec)}")
    if (spec.minimum is not None and value < spec.minimum) or (
            spec.maximum is not None and value > spec.maximum):
        return ValueProblem("range", f"{value!r} is not {describe_constraint(spec)}")
    return None



def azure_value(ptype: ParamType, value: Any) -> Any:
    """``value`` as Azure ML reads a value of type ``ptype`` (azure-ai-ml's ``Input._parse``):
    an integer from ``"10"`` (or ``"10.0"``), a number from ``"1e-3"`` (YAML 1.1 reads
    ``1e-3`` as text; azure-ai-ml then parses it), a boolean from ``"true"``/``"False"`` in any
    case. Values of the right type, and strings for a string, are returned as they are.

    Raises:
        ValueError: text that Azure ML would not parse either, saying why.

    Example:
        >>> azure_value(ParamType.FLOAT, "1e-3"), azure_value(ParamType.BOOL, "False")
        (0.001, False)
    """
    if value is None or (isinstance(value, bool) and ptype is ParamType.BOOL):
        return value
    if ptype is ParamType.INT:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, (str, float)) and not isinstance(value, bool):
            try:
                number = float(value)
            except ValueError:
                raise ValueError(f"{value!r} is not an integer") from None
            if number != number or number in (float("inf"), float("-inf")):
                raise ValueError(f"{value!r} is not an integer")
            return int(number)
        raise ValueError(f"{value!r} is not an integer")
    if ptype is ParamType.FLOAT:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                raise ValueError(f"{value!r} is not a number") from None
        raise ValueError(f"{value!r} is not a number")
    if ptype is ParamType.BOOL:
        text = str(value).lower()
        if text not in ("true", "false"):
            raise ValueError(f"{value!r} is not a boolean (Azure ML reads true or false)")
        return text == "true"
    if ptype in (ParamType.STR, ParamType.ENUM, ParamType.SECRET):
        return value if isinstance(value, str) else str(value)
    return value


def read_as_azure(spec: ParamSpec, value: Any) -> tuple[Any, bool]:
    """``value`` as Azure ML hands it to a parameter of ``spec``'s type, and whether that
    changed what it means (``10.01`` for an integer becomes ``10``). A value Azure ML cannot
    read as the type comes back unchanged (``check_value`` then says what is wrong).

    Example:
        >>> read_as_azure(ParamSpec("n", ParamType.INT), "12"), read_as_azure(
        ...     ParamSpec("n", ParamType.INT), 10.01)
        ((12, False), (10, True))
    """
    if spec.type is ParamType.ENUM:
        return value, False
    try:
        parsed = azure_value(spec.type, value)
    except ValueError:
        return value, False
    lossy = spec.type is ParamType.INT and parsed is not None and float(value) != parsed
    return parsed, lossy
