"""The step entry point: ``python -m mlpipe.runtime.step REQUEST.json`` (the local executor)
or ``python -m mlpipe.runtime.step --component MOD:FN --input NAME=PATH ...`` (an exported
Azure ML command; see ``mlpipe.runtime.argv``).

Imports the component's module, binds inputs, outputs and parameters, and calls the plain
function. A failure prints the traceback (into the step's log) and writes ``error.json`` in
``$MLPIPE_STEP_DIR``. Must not import the graph, checks, backends or the evidence store.
"""
from __future__ import annotations

import importlib
import json
import os
import sys
import traceback
from typing import Any

ERROR_FILE = "error.json"


def _resolve(target: str) -> Any:
    module_name, _, qualname = target.partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def _params(component: Any, values: dict[str, Any]) -> dict[str, Any]:
    # Component.param reads the declaration without building the spec (no code digest here)
    lookup = getattr(component, "param", None) or getattr(getattr(component, "spec", None),
                                                           "param", None)
    bound = dict(values)
    for name, value in values.items():
        param = lookup(name) if lookup is not None else None
        enum_class = getattr(param, "enum_class", None)
        if enum_class is not None and not isinstance(value, enum_class):
            bound[name] = enum_class(value)
    return bound


def run(request: dict[str, Any]) -> None:
    """Run one step as ``request`` describes (keys: function, sys_path, inputs, outputs,
    params)."""
    for entry in reversed(request.get("sys_path", [])):
        if entry not in sys.path:
            sys.path.insert(0, entry)
    component = _resolve(request["function"])
    fn = getattr(component, "fn", component)
    kwargs = {**request["inputs"], **request["outputs"], **_params(component, request["params"])}
    fn(**kwargs)


def _die_with_parent() -> None:
    """Ask Linux to kill this step if its executor dies (kill -9 leaves no orphan running)."""
    parent = os.environ.get("MLPIPE_PARENT_PID")
    if not parent or not sys.platform.startswith("linux"):
        return
    import ctypes
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL
    except (OSError, AttributeError):
        return
    if str(os.getppid()) != parent:  # the executor died before prctl took effect
        os._exit(137)


def request_from_argv(args: list[str]) -> dict[str, Any]:
    """The request an exported command line describes, with parameters typed by the spec.

    Warns (on stderr) when the component's digest here differs from the one it was compiled
    with: the environment then runs other code than what was checked and exported.
    """
    from mlpipe.runtime.argv import coerce_param, parse_step_argv

    parsed = parse_step_argv(args)
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    component = _resolve(parsed.component)
    spec = getattr(component, "spec", None)
    params: dict[str, Any] = {}
    for name, text in parsed.params.items():
        param = spec.param(name) if spec is not None else None
        params[name] = coerce_param(param, text) if param is not None else text
    if parsed.digest and spec is not None and spec.digest != parsed.digest:
        print(f"mlpipe: warning: component {parsed.component} has digest {spec.digest} here "
              f"but was compiled as {parsed.digest}; the code or its declaration changed",
              file=sys.stderr)
    return {"function": parsed.component, "sys_path": [], "inputs": parsed.inputs,
            "outputs": parsed.outputs, "params": params}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    _die_with_parent()
    if args and args[0].startswith("--"):
        from mlpipe.errors import MlpipeError

        try:
            request = request_from_argv(args)
        except MlpipeError as err:
            print(f"error: {err.render()}", file=sys.stderr)
            return 2
    elif len(args) == 1:
        with open(args[0], encoding="utf-8") as fh:
            request = json.load(fh)
    else:
        print("usage: python -m mlpipe.runtime.step REQUEST.json\n"
              "       python -m mlpipe.runtime.step --component MOD:FN [--input NAME=PATH] "
              "[--output NAME=PATH] [--param NAME=VALUE]", file=sys.stderr)
        return 2
    return execute(request)


def execute(request: dict[str, Any]) -> int:
    """Run ``request`` (see :func:`run`) as a step process does; its exit status.

    A failure prints the traceback and writes ``error.json`` in ``$MLPIPE_STEP_DIR``. The
    fork server calls this in each forked step.
    """
    try:
        run(request)
    except BaseException as exc:  # the step's own failure, reported to the executor
        traceback.print_exc()
        step_dir = os.environ.get("MLPIPE_STEP_DIR")
        if step_dir:
            with open(os.path.join(step_dir, ERROR_FILE), "w", encoding="utf-8") as fh:
                json.dump({"type": type(exc).__name__, "message": str(exc)}, fh)
        return 130 if isinstance(exc, KeyboardInterrupt) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
