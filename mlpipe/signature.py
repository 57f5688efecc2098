"""The signature reader: a decorated function's parameters become port and parameter specs.

Raises DefinitionError (with the user's file and line) for what makes a spec impossible;
never judges wiring, which is the checks' job.
"""
from __future__ import annotations

import enum
import inspect
import typing
from dataclasses import replace
from types import FunctionType
from typing import Any, NoReturn

from mlpipe.annotations import Param, ParamMarker, PortMarker, param_marker
from mlpipe.errors import DefinitionError
from mlpipe.params import check_value, param_type_of
from mlpipe.secret import Secret
from mlpipe.source import FunctionSource
from mlpipe.spec import ParamSpec, ParamType, PortSpec, plain_value

_ANNOTATE_HINT = ("annotate it as Input[...] (an artifact read), Output[...] (an artifact "
                  "written) or Param[...] (a scalar setting)")


def _fail(message: str, hint: str | None, src: FunctionSource,
          param: str | None = None) -> NoReturn:
    loc = src.location(param)
    raise DefinitionError(message, hint=hint, file=loc.file if loc else None,
                          line=loc.line if loc else None)


def type_hints(fn: FunctionType, what: str, src: FunctionSource) -> dict[str, Any]:
    """``get_type_hints`` with extras, turning unresolvable annotations into DefinitionError."""
    try:
        return typing.get_type_hints(fn, include_extras=True)
    except Exception as exc:  # NameError, TypeError from a string annotation
        _fail(f"the annotations of {what} cannot be evaluated: {exc}",
              "import every name used in an annotation at module level", src)
        raise  # unreachable: _fail raises


def marker_of(hint: Any) -> PortMarker | ParamMarker | None:
    """The port or parameter marker an annotation carries (``Input[...]``, ``Param[...]``,
    ``Annotated[int, Range(1, 200)]``), or None for a plain type."""
    for meta in getattr(hint, "__metadata__", ()):
        if isinstance(meta, (PortMarker, ParamMarker)):
            return meta
    return param_marker(hint)  # Annotated[int, Range(1, 200)]


Ports = tuple[PortSpec, ...]


def read_component_signature(fn: FunctionType, what: str, src: FunctionSource
                             ) -> tuple[Ports, Ports, tuple[ParamSpec, ...]]:
    """Inputs, outputs and params of a component function, in declaration order."""
    hints = type_hints(fn, what, src)
    inputs: list[PortSpec] = []
    outputs: list[PortSpec] = []
    params: list[ParamSpec] = []
    seen_lower: dict[str, str] = {}
    for name, p in inspect.signature(fn).parameters.items():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            _fail(f"{what} takes {'*' if p.kind is p.VAR_POSITIONAL else '**'}{name}; a "
                  f"component's ports must each be named", "declare every input, output and "
                  "parameter as its own argument", src, name)
        if name.startswith("_") or not name.isascii():
            _fail(f"port name {name!r} of {what} would be rejected by Azure ML",
                  "use ASCII letters, digits and underscores, starting with a letter", src, name)
        if name.lower() in seen_lower:
            _fail(f"{what} has ports {seen_lower[name.lower()]!r} and {name!r}, which Azure ML "
                  f"treats as the same name (it ignores case)", "rename one of them", src, name)
        seen_lower[name.lower()] = name
        if name not in hints:
            _fail(f"parameter {name!r} of {what} has no annotation", _ANNOTATE_HINT, src, name)
        hint = hints[name]
        marker = marker_of(hint)
        has_default = p.default is not inspect.Parameter.empty
        if marker is None:
            if hint in (int, float, str, bool, Secret) or (isinstance(hint, type)
                                                   and issubclass(hint, enum.Enum)):
                marker = typing.get_args(_param_annotation(hint))[1]
            else:
                _fail(f"parameter {name!r} of {what} is annotated {_show(hint)}, which mlpipe "
                      f"cannot map to an input, output or parameter", _ANNOTATE_HINT, src, name)
        if marker.problem:
            _fail(f"parameter {name!r} of {what}: {marker.problem}", None, src, name)
        if isinstance(marker, PortMarker):
            port = PortSpec(name, marker.port_kind, marker.contract,
                            description=marker.description)
            if marker.direction == "Output":
                if has_default:
                    _fail(f"output {name!r} of {what} has a default ({p.default!r}); an output "
                          f"is a path mlpipe provides", "remove the default", src, name)
                outputs.append(port)
            else:
                if has_default and p.default is not None:
                    _fail(f"input {name!r} of {what} has the default {p.default!r}; an input's "
                          f"default can only be None (optional)",
                          "bind a data reference in the pipeline instead", src, name)
                inputs.append(PortSpec(name, marker.port_kind, marker.contract,
                                       optional=has_default, description=marker.description))
        else:
            default = p.default if has_default else inspect.Parameter.empty
            params.append(_param_spec(name, marker, default, what, src))
    return tuple(inputs), tuple(outputs), tuple(params)


def _param_annotation(python_type: type) -> Any:
    return Param[python_type]


def _show(hint: Any) -> str:
    return getattr(hint, "__name__", None) or repr(hint)


def _param_spec(name: str, marker: ParamMarker, default: Any, what: str,
                src: FunctionSource) -> ParamSpec:
    ptype = param_type_of(marker.python_type)
    enum_class = marker.type if ptype is ParamType.ENUM else None
    spec = ParamSpec(name, ptype, required=default is inspect.Parameter.empty,
                     minimum=marker.minimum, maximum=marker.maximum, choices=marker.choices,
                     enum_class=enum_class, description=marker.description)
    if spec.required or default is None:
        return spec if spec.required else _replace_default(spec, None)
    if ptype is ParamType.SECRET:  # the default itself is never shown
        _fail(f"parameter {name!r} of {what} is a Secret with a default value; a value written "
              f"in the code is in its source, its digest and the code revision in clear",
              f"remove the default and give the value when submitting (--secret "
              f"{name}=ENV_VAR); a default of None makes it optional", src, name)
    problem = check_value(spec, default)
    if problem is not None:
        _fail(f"default of parameter {name!r} of {what}: {problem.message}",
              "change the default or the constraint", src, name)
    return _replace_default(spec, plain_value(default))


def _replace_default(spec: ParamSpec, default: Any) -> ParamSpec:
    return replace(spec, required=False, default=default)
