"""``Input[T]``, ``Output[T]`` and ``Param[T]``: how a component declares its ports.

The typed form, which type checkers (pyright, mypy) accept and see as the run-time value:

- ``Input[UriFolder]``, ``Output[MLflowModelFolder]``: a port of an Azure ML kind; the body
  gets a ``Path``. The kinds are ``Annotated[Path, AssetType...]`` aliases defined here.
- ``Input[Labels]`` with ``Labels = Annotated[Path, LABELS]``: a port carrying a contract (the
  contract in the alias's metadata, where a type checker accepts any value).
- ``Param[int]`` (an ``int`` to checkers), ``Annotated[int, Range(1, 200)]``,
  ``Annotated[str, Choices("adam", "sgd")]``: a parameter and its constraint.

The short form ``Input["uri_folder"]``, ``Output[LABELS]``, ``Param[int, 1:200]`` keeps working
at run time; type checkers cannot read it (a string or a value where a type belongs).

Each builds a ``typing.Annotated`` whose metadata the signature reader understands.
Subscripting never raises: a malformed annotation is reported, with the user's line, when the
component is declared.
"""
from __future__ import annotations

import enum
import pathlib
import typing
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

from mlpipe.artifacts import AssetType, parse_asset_type
from mlpipe.contracts.base import Contract, contract_transport, is_contract
from mlpipe.errors import with_article
from mlpipe.secret import Secret

_KINDS = ", ".join(k.value for k in AssetType)

#: The Azure ML kinds as typed port types: ``Input[UriFolder]`` is a ``Path`` to checkers.
UriFile = Annotated[pathlib.Path, AssetType.URI_FILE]
UriFolder = Annotated[pathlib.Path, AssetType.URI_FOLDER]
MLTable = Annotated[pathlib.Path, AssetType.MLTABLE]
MLflowModelFolder = Annotated[pathlib.Path, AssetType.MLFLOW_MODEL]
CustomModelFolder = Annotated[pathlib.Path, AssetType.CUSTOM_MODEL]


@dataclass(frozen=True, slots=True)
class Range:
    """An inclusive range for an int or float parameter: ``Annotated[int, Range(1, 200)]``
    (either end may be None: open). The typed spelling of ``Param[int, 1:200]``."""

    low: float | None = None
    high: float | None = None


@dataclass(frozen=True, slots=True, init=False)
class Choices:
    """The allowed values of a parameter: ``Annotated[str, Choices("adam", "sgd")]``. The typed
    spelling of ``Param[str, ["adam", "sgd"]]``."""

    values: tuple[Any, ...]

    def __init__(self, *values: Any) -> None:
        object.__setattr__(self, "values", values)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Marker:
    """What every marker records beside its port or parameter: the description, and
    ``problem`` when the annotation was malformed (reported when the component is declared)."""

    description: str | None = None
    problem: str | None = None


@dataclass(frozen=True, slots=True)
class PortMarker(_Marker):
    """What ``Input[...]``/``Output[...]`` recorded."""

    direction: str
    kind: AssetType | None
    contract: Contract | type[Contract] | None

    @property
    def port_kind(self) -> AssetType:
        """The kind of a well-formed marker (one whose ``problem`` is None)."""
        assert self.kind is not None, self.problem
        return self.kind


@dataclass(frozen=True, slots=True)
class ParamMarker(_Marker):
    """What ``Param[...]`` recorded."""

    type: type | None
    minimum: Any = None
    maximum: Any = None
    choices: tuple[Any, ...] | None = None

    @property
    def python_type(self) -> type:
        """The type of a well-formed marker (one whose ``problem`` is None)."""
        assert self.type is not None, self.problem
        return self.type


def _port_type(direction: str, target: Any, description: str | None) -> PortMarker:
    """The marker for ``Input[Annotated[Path, ...]]``: a kind alias or a contract alias."""
    metadata = target.__metadata__
    contract = next((m for m in metadata if is_contract(m)), None)
    kind = next((m for m in metadata if isinstance(m, AssetType)), None)
    text = next((m for m in metadata
                 if isinstance(m, str) and not isinstance(m, AssetType)), None)
    description = description or text
    if contract is not None:
        if kind is not None and kind is not contract_transport(contract):
            return PortMarker(direction, None, None, problem=(
                f"{direction}[...] names the kind {kind.value} and a contract that travels as "
                f"{contract_transport(contract).value}; give the contract alone"))
        return PortMarker(direction, contract_transport(contract), contract,
                          description=description)
    if kind is not None:
        return PortMarker(direction, kind, None, description=description)
    return PortMarker(direction, None, None, problem=(
        f"{direction}[{target!r}] carries neither an artifact kind nor a contract; use one of "
        f"UriFile, UriFolder, MLTable, MLflowModelFolder, CustomModelFolder, or "
        f"Annotated[Path, CONTRACT]"))


def _port(direction: str, item: Any) -> Any:
    args = item if isinstance(item, tuple) else (item,)
    target, rest = args[0], args[1:]
    description = rest[0] if rest and isinstance(rest[0], str) else None
    if len(rest) > 1 or (rest and description is None):
        marker = PortMarker(direction, None, None, problem=(
            f"{direction}[...] takes a type and an optional description string, got {item!r}"))
    elif typing.get_origin(target) is Annotated:
        marker = _port_type(direction, target, description)
    elif is_contract(target):
        marker = PortMarker(direction, contract_transport(target), target,
                            description=description)
    elif (kind := parse_asset_type(target)) is not None:
        marker = PortMarker(direction, kind, None, description=description)
    else:
        marker = PortMarker(direction, None, None, problem=(
            f"{direction}[{target!r}] is not an artifact type; use one of {_KINDS} "
            f"(typed: UriFolder, ...) or a contract from mlpipe.contracts"))
    return Annotated[pathlib.Path, marker]


class _Input:
    """An artifact the step reads: ``Input[UriFolder]``, ``Input[Labels]`` (a contract alias
    ``Annotated[Path, LABELS]``); the short form ``Input["uri_folder"]``, ``Input[LABELS]``.

    The step body receives the artifact's local path. A default of ``None`` makes the
    input optional.

    Example:
        >>> def train(examples: Input[UriFolder], model: Output[MLflowModelFolder]): ...
    """

    def __class_getitem__(cls, item: Any) -> Any:
        return _port("Input", item)


class _Output:
    """An artifact the step writes: ``Output[MLflowModelFolder]``, ``Output[Model]`` (a contract
    alias); the short form ``Output["mlflow_model"]``, ``Output[MODEL]``.

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
    if typ is Secret:
        if constraint is not None:
            return bad("Param[Secret] takes no range or choices: allowed values written in "
                       "the code would tell the secret; check the value in the step")
        return Annotated[Secret, ParamMarker(Secret, description=description)]
    if not (typ in _SCALARS or is_enum):
        return bad(f"Param[{getattr(typ, '__name__', typ)!s}] is not a parameter type; "
                   f"use int, float, str, bool, an Enum or Secret")
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
        for value in values:
            wrong = _choice_problem(typ, value)
            if wrong:
                return bad(wrong)
        choices = tuple(values)
    elif constraint is not None:
        return bad(f"{constraint!r} is not a Param constraint; use low:high for a range or "
                   f"a list of choices")
    if is_enum:
        members = typing.cast("type[enum.Enum]", typ)
        choices = tuple(m.value for m in members) if choices is None else tuple(
            c.value if isinstance(c, enum.Enum) else c for c in choices)
    return Annotated[typ, ParamMarker(typ, minimum, maximum, choices, description=description)]


class _Param:
    """A scalar parameter: ``Param[int]``; with a constraint, typed
    ``Annotated[int, Range(1, 200)]`` or ``Annotated[str, Choices("adam", "sgd")]``, short
    ``Param[int, 1:200]`` or ``Param[str, ["adam", "sgd"]]``.

    The type is one of int, float, str, bool, an Enum or ``Secret``. A range is inclusive at
    both ends, either end may be left open (``1:``, ``Range(1, None)``); choices list the
    allowed values. A last string argument (or string in ``Annotated``) is the description.
    The function's default is the parameter's default; without one the parameter is required.

    ``Param[Secret]`` (a ``str`` to checkers) is given at submit time (``--secret
    NAME=ENV_VAR``) and written down only as a keyed hash (``mlpipe.secret``); it takes no
    default (``None`` alone: optional), range or choices.

    Example:
        >>> def train(epochs: Annotated[int, Range(1, 200)] = 10,
        ...           optimizer: Annotated[str, Choices("adam", "sgd")] = "adam"): ...
    """

    def __class_getitem__(cls, item: Any) -> Any:
        return _param(item)


def param_marker(hint: Any) -> ParamMarker | None:
    """The parameter ``Annotated[T, Range(...) | Choices(...) | "description"]`` declares, or
    None when ``hint`` is not such an annotation."""
    if typing.get_origin(hint) is not Annotated:
        return None
    base = typing.get_args(hint)[0]
    if not (base in _SCALARS or base is Secret
            or (isinstance(base, type) and issubclass(base, enum.Enum))):
        return None
    constraint: Any = None
    description = None
    for meta in hint.__metadata__:
        if isinstance(meta, Range):
            constraint = slice(meta.low, meta.high)
        elif isinstance(meta, Choices):
            constraint = list(meta.values)
        elif isinstance(meta, str):
            description = meta
    args = (base, *([constraint] if constraint is not None else []),
            *([description] if description is not None else []))
    return typing.get_args(_param(args))[1]


if TYPE_CHECKING:
    # What type checkers see: a port is the Path the body receives, a parameter its value.
    from typing import TypeVar

    from typing_extensions import TypeAliasType

    _K = TypeVar("_K")
    _T = TypeVar("_T")
    Input = TypeAliasType("Input", pathlib.Path, type_params=(_K,))
    Output = TypeAliasType("Output", pathlib.Path, type_params=(_K,))
    Param = TypeAliasType("Param", _T, type_params=(_T,))
else:
    Input, Output, Param = _Input, _Output, _Param
    Input.__name__ = Input.__qualname__ = "Input"
    Output.__name__ = Output.__qualname__ = "Output"
    Param.__name__ = Param.__qualname__ = "Param"


def _choice_problem(typ: Any, value: Any) -> str | None:
    """Why ``value`` cannot be a choice of ``Param[typ, [...]]`` (a value of another type could
    never be given), or None."""
    if isinstance(typ, type) and issubclass(typ, enum.Enum):
        return None
    fits = (isinstance(value, bool) if typ is bool else
            isinstance(value, (int, float)) and not isinstance(value, bool) if typ is float else
            isinstance(value, typ) and not isinstance(value, bool))
    if fits:
        return None
    return (f"choice {value!r} of Param[{typ.__name__}, [...]] is "
            f"{with_article(type(value).__name__)}, not {with_article(typ.__name__)}; every "
            f"choice must be {with_article(typ.__name__)}")
