"""``Input[T]``, ``Output[T]`` and ``Param[T, constraint]``: how a component declares its ports.

Each builds a ``typing.Annotated`` whose metadata the signature reader understands; type
checkers see the run-time value (a ``Path`` for artifacts, the scalar for parameters).
Subscripting never raises: a malformed annotation is reported, with the user's line, when
the component is declared.
"""
from __future__ import annotations

import enum
import pathlib
from dataclasses import dataclass
from typing import Annotated, Any

from mlpipe.artifacts import AssetType, parse_asset_type
from mlpipe.contracts.base import Contract, contract_transport, is_contract

_KINDS = ", ".join(k.value for k in AssetType)


@dataclass(frozen=True, slots=True)
class PortMarker:
    """What ``Input[...]``/``Output[...]`` recorded; ``problem`` is set when it was malformed."""

    direction: str
    kind: AssetType | None
    contract: Contract | type[Contract] | None
    description: str | None = None
    problem: str | None = None


@dataclass(frozen=True, slots=True)
class ParamMarker:
    """What ``Param[...]`` recorded; ``problem`` is set when it was malformed."""

    type: type | None
    minimum: Any = None
    maximum: Any = None
    choices: tuple[Any, ...] | None = None
    description: str | None = None
    problem: str | None = None


def _port(direction: str, item: Any) -> Any:
    args = item if isinstance(item, tuple) else (item,)
    target, rest = args[0], args[1:]
    description = rest[0] if rest and isinstance(rest[0], str) else None
    if len(rest) > 1 or (rest and description is None):
        marker = PortMarker(direction, None, None, problem=(
            f"{direction}[...] takes a type and an optional description string, got {item!r}"))
    elif is_contract(target):
        marker = PortMarker(direction, contract_transport(target), target, description)
    elif (kind := parse_asset_type(target)) is not None:
        marker = PortMarker(direction, kind, None, description)
    else:
        marker = PortMarker(direction, None, None, problem=(
            f"{direction}[{target!r}] is not an artifact type; use one of {_KINDS} "
            f"or a contract from mlpipe.contracts"))
    return Annotated[pathlib.Path, marker]


class Input:
    """An artifact the step reads: ``Input["uri_folder"]``, ``Input[SomeContract]``.

    The step body receives the artifact's local path. A default of ``None`` makes the
    input optional.

    Example:
        >>> def train(examples: Input["uri_folder"], model: Output["mlflow_model"]): ...
    """

    def __class_getitem__(cls, item: Any) -> Any:
        return _port("Input", item)


class Output:
    """An artifact the step writes: ``Output["mlflow_model"]``, ``Output[SomeContract]``.

    The step body receives the local path to write to. Outputs take no default.
    """

    def __class_getitem__(cls, item: Any) -> Any:
        return _port("Output", item)


_SCALARS = (bool, int, float, str)


def _param(item: Any) -> Any:
    typ, *rest = item if isinstance(item, tuple) else (item,)
    description = rest.pop() if rest and isinstance(rest[-1], str) else None
    constraint = rest[0] if rest else None

    def bad(problem: str) -> Any:
        return Annotated[Any, ParamMarker(None, problem=problem)]

    if len(rest) > 1:
        return bad(f"Param[...] takes a type, an optional constraint and an optional "
                   f"description, got {item!r}")
    is_enum = isinstance(typ, type) and issubclass(typ, enum.Enum)
    if not (typ in _SCALARS or is_enum):
        return bad(f"Param[{getattr(typ, '__name__', typ)!s}] is not a parameter type; "
                   f"use int, float, str, bool or an Enum")
    minimum = maximum = choices = None
    if isinstance(constraint, slice):
        if typ not in (int, float) or constraint.step is not None:
            return bad(f"a range like 1:200 only constrains an int or float Param, "
                       f"got Param[{typ.__name__}, {constraint.start}:{constraint.stop}]")
        minimum, maximum = constraint.start, constraint.stop
        for bound in (minimum, maximum):
            if bound is not None and (isinstance(bound, bool)
                                      or not isinstance(bound, (int, float))):
                return bad(f"range bounds must be numbers, got {bound!r}")
        if minimum is not None and maximum is not None and minimum > maximum:
            return bad(f"range {minimum}:{maximum} is empty; write it as low:high")
    elif isinstance(constraint, (list, tuple, set, frozenset)):
        values = (sorted(constraint, key=repr) if isinstance(constraint, (set, frozenset))
                  else list(constraint))
        if not values:
            return bad("a choices list must not be empty")
        choices = tuple(values)
    elif constraint is not None:
        return bad(f"{constraint!r} is not a Param constraint; use low:high for a range or "
                   f"a list of choices")
    if is_enum:
        choices = tuple(m.value for m in typ) if choices is None else tuple(
            c.value if isinstance(c, enum.Enum) else c for c in choices)
    return Annotated[typ, ParamMarker(typ, minimum, maximum, choices, description)]


class Param:
    """A scalar parameter: ``Param[int]``, ``Param[int, 1:200]``, ``Param[str, ["adam", "sgd"]]``.

    The type is one of int, float, str, bool or an Enum. A range ``low:high`` is inclusive at
    both ends, either end may be left open (``1:``); a list gives the allowed choices. A last
    string argument is the description. The function's default is the parameter's default;
    without one the parameter is required.

    Example:
        >>> def train(epochs: Param[int, 1:200] = 10,
        ...           optimizer: Param[str, ["adam", "sgd"]] = "adam"): ...
    """

    def __class_getitem__(cls, item: Any) -> Any:
        return _param(item)
