"""The step entry point: ``python -m mlpipe.runtime.step REQUEST.json`` (the local executor)
or ``python -m mlpipe.runtime.step --component MOD:FN --input NAME=PATH ... --record DIR`` (an
exported Azure ML command; see ``mlpipe.runtime.argv``). Both run the same step runtime.

Imports the component's module, validates its input contracts, binds inputs, outputs and
parameters, and calls the plain function while watching its file access; then records this
rank's part of the step record and, on rank 0, finishes the step (outputs present, output
contracts, content digests: ``mlpipe.runtime.finish``). A failure prints one message (a
traceback for a failure of the step's own code) and exits non-zero. Must not import the graph,
checks, backends or the evidence store.
"""
from __future__ import annotations

import importlib
import json
import os
import sys
import traceback
from dataclasses import dataclass, field
from typing import Any

from mlpipe import localimport
from mlpipe.runtime import (
    children,
    finish,
    loaders,
    metrics,
    observe,
    ranktrace,
    record,
    tracking,
    watchdog,
)
from mlpipe.runtime.masking import OutputMask
from mlpipe.secret import Redactor, take_from_environment

#: The executor's scratch folder of a step (ignored by the observation), when it has one.
SCRATCH_ENV = "MLPIPE_SCRATCH"


def _resolve(target: str) -> Any:
    localimport.install()   # the body's own modules run as their source says (the digest's)
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


def _declared(component: Any, field: str) -> Any:
    reader = getattr(component, "declared", None)
    if reader is not None:
        return reader(field)
    spec = getattr(component, "spec", None)
    return getattr(spec, field, None) if spec is not None else None


def _ports(component: Any, field: str) -> list[finish.Port]:
    return [finish.Port(p.name, getattr(p.kind, "value", str(p.kind)), p.contract)
            for p in _declared(component, field) or ()]


def _launch_env(distribution: Any) -> None:
    """Hand the body its declared launch: writer policy and backend, as the local launcher
    does (on Azure ML nothing else sets them)."""
    from mlpipe.runtime.devices import BACKEND_VAR
    from mlpipe.runtime.distributed import WRITERS_VAR

    if distribution is None:
        return
    writers = dict(getattr(distribution, "writers", ()) or ())
    os.environ.setdefault(WRITERS_VAR, json.dumps(writers or {"*": "rank0"}))
    backend = getattr(distribution, "backend", None)
    if backend:
        os.environ.setdefault(BACKEND_VAR, backend)


_LAUNCH_FUNCTIONS = {"init_process_group", "_env_rendezvous_handler", "_create_c10d_store",
                     "rendezvous", "_new_process_group_helper"}


def _layer(exc: BaseException) -> str:
    """The layer a failure of the body belongs to: ``launch`` when the process group could
    not form (initialisation, rendezvous, collectives without a group), else ``step-code``."""
    from mlpipe.errors import DistributedError

    if isinstance(exc, DistributedError):
        return "launch"
    tb = exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if "torch/distributed/" in code.co_filename.replace(os.sep, "/") and \
                code.co_name in _LAUNCH_FUNCTIONS:
            return "launch"
        tb = tb.tb_next
    return "step-code"


def preload() -> None:
    """Import (and work out) now what running a step otherwise does on first use: the host
    name's ``socket``, the output digests' ``blake3``, ``ctypes`` for adopting orphans, the
    observation's interpreter folders. The fork server calls it once,
    so that each step forked from it does not pay them again (tens of milliseconds a step);
    a fresh interpreter never calls it. Starts no thread."""
    import atexit  # noqa: F401  (record: the rank's part is saved at exit)
    import ctypes  # noqa: F401  (children: the step adopts its orphans)
    import socket  # noqa: F401  (record's host name)

    from mlpipe import digests

    digests.preload()  # the output digests' blake3

    observe.preload()
    ranktrace.install()   # before the fork server imports the run's component modules


def _ran(result: Any) -> None:
    """Refuse what a generator or coroutine function returned: its body never ran (check
    MP960 says so before a run; this holds when that finding was ignored)."""
    import inspect

    if inspect.isgenerator(result) or inspect.iscoroutine(result) or inspect.isasyncgen(result):
        close = getattr(result, "close", None)
        if close is not None:
            close()
        raise TypeError(f"the component's function returned {type(result).__name__!r} "
                        f"without running its body (a generator or async def; see MP960)")


def die_with_parent() -> None:
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
            "outputs": parsed.outputs, "params": params, "record": parsed.record,
            "digest": spec.digest if spec is not None else None,
            "compiled_digest": parsed.digest,
            # no executor of mlpipe's saw this interpreter (Azure ML ran it): the record says
            "describe_interpreter": True}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    die_with_parent()
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
              "[--output NAME=PATH] [--param NAME=VALUE] [--record DIR]", file=sys.stderr)
        return 2
    return execute(request)


def execute(request: dict[str, Any]) -> int:
    """Run ``request`` as a step process does and record it; its exit status.

    ``request`` (the local executor's ``request.json``, or what an exported command line
    says): ``function``, ``sys_path``, ``inputs``, ``outputs``, ``params`` and optionally
    ``record`` (the record folder; else ``$MLPIPE_STEP_DIR``), ``digest`` (the component's
    spec digest) and ``compiled_digest``. Without a record folder the body runs with its
    inputs validated, and nothing is recorded. The fork server calls this in each forked step.
    Processes the body started and left running are killed when it returns.
    """
    children.adopt()
    # the secrets the executor handed over, gone from the environment before the body runs,
    # and masked in what the step prints
    secrets = take_from_environment()
    redact = Redactor(secrets)
    mask = OutputMask(redact) if redact else None
    if mask is not None:
        mask.start()
        metrics.mask_populations(redact.text)
    try:
        return _execute(request, secrets, redact)
    finally:
        children.stop()
        if mask is not None:
            metrics.mask_populations(None)
            mask.stop()


@dataclass(slots=True)
class _Body:
    """What calling the step's function left: its checked inputs, declared outputs and reads,
    the observer of its file access and what the data loaders fed, its failure and exit
    status (filled in as far as the call got)."""

    inputs_checked: dict[str, Any] = field(default_factory=dict)
    outputs: list[finish.Port] = field(default_factory=list)
    reads: tuple[str, ...] = ()
    observer: observe.Observer | None = None
    failure: dict[str, Any] | None = None
    fed: dict[str, Any] | None = None
    traced: dict[str, Any] = field(default_factory=lambda: {"trace": None})
    code: int = 0


def _execute(request: dict[str, Any], secrets: dict[str, Any], redact: Redactor) -> int:
    if request.get("record"):
        os.environ[record.RECORD_DIR_ENV] = os.path.abspath(request["record"])
        os.makedirs(os.environ[record.RECORD_DIR_ENV], exist_ok=True)
    record.reset()
    part = record.current()
    started = record.now()
    rank = record.identity()["rank"]
    body = _run_body(request, secrets, redact, part, rank)
    state = tracking.close(failed=body.failure is not None)
    if part is None:
        return _finish_unrecorded(request, body, rank)
    seen = body.observer.result() if body.observer is not None else observe.unobserved(
        "switched off (MLPIPE_OBSERVE=0)" if not observe.enabled() else
        "the step failed before its body ran")
    part.update(status="failed" if body.failure else "succeeded", failure=body.failure,
                finished_at=record.now(), inputs=body.inputs_checked, tracking=state, **seen,
                **(body.fed or {}), **body.traced)
    record.merge_children(part)
    part.flush()
    if rank != 0 or part.data["role"] != "worker":
        return body.code
    return _finish_step(request, body, part, started)


def _run_body(request: dict[str, Any], secrets: dict[str, Any], redact: Redactor,
              part: record.RankPart | None, rank: int) -> _Body:
    """Call the step's function; its failure (an input contract's, or its own) is reported
    on stderr and kept, never raised."""
    body = _Body()
    try:
        _call(request, secrets, part, body)
    except finish.InputsRefused as exc:  # an input that does not match its contract
        body.inputs_checked = exc.results
        body.failure = exc.failure.to_json(rank)
        body.failure["message"] = redact.text(body.failure["message"])
        print(f"mlpipe: {body.failure['message']}", file=sys.stderr)
        body.code = 1
    except BaseException as exc:  # the step's own failure, reported to the executor
        traceback.print_exc()
        body.failure = {"layer": _layer(exc), "type": type(exc).__name__,
                        "message": redact.text(f"{type(exc).__name__}: {exc}"), "port": None,
                        "rank": rank}
        body.code = 130 if isinstance(exc, KeyboardInterrupt) else 1
    return body


def _call(request: dict[str, Any], secrets: dict[str, Any], part: record.RankPart | None,
          body: _Body) -> None:
    """Import the component, check its inputs, bind its arguments and call it, its file
    access watched (with a record folder and observation on)."""
    for entry in reversed(request.get("sys_path", [])):
        if entry not in sys.path:
            sys.path.insert(0, entry)
    if part is not None:
        ranktrace.install()   # before the component's module binds torch's names
    component = _resolve(request["function"])
    fn = getattr(component, "fn", component)
    body.outputs = _ports(component, "outputs")
    body.reads = tuple(_declared(component, "reads") or ())
    _launch_env(_declared(component, "distribution"))
    kwargs = {**request["inputs"], **request["outputs"],
              **_params(component, {**request["params"], **secrets})}
    body.inputs_checked = finish.check_inputs(_ports(component, "inputs"), request["inputs"])
    if part is not None:
        part.update(inputs=body.inputs_checked)
    if part is not None and observe.enabled():
        body.observer = observe.Observer(observe.Filter(
            request["inputs"], request["outputs"],
            scratch=[record.folder(), os.environ.get(SCRATCH_ENV)]))
        body.observer.start()
    if body.observer is not None:
        loaders.start()
    trace = ranktrace.start() if part is not None else None
    dog = watchdog.start(trace)
    try:
        _ran(fn(**kwargs))
    finally:
        if dog is not None:
            dog.stop()
        if trace is not None:
            body.traced = ranktrace.stop()
        if body.observer is not None:
            body.observer.stop()
            body.fed = loaders.stop()


def _finish_unrecorded(request: dict[str, Any], body: _Body, rank: int) -> int:
    """No record folder: the outputs are still checked (on rank 0), nothing is written."""
    code = body.code
    if code == 0 and rank == 0:
        step = finish.finish(None, me=record.identity(), outputs=body.outputs,
                             paths=request["outputs"], header={}, failure=None)
        if step["failure"] is not None:
            print(f"mlpipe: {step['failure']['message']}", file=sys.stderr)
            code = 1
    return code


def _finish_step(request: dict[str, Any], body: _Body, part: record.RankPart,
                 started: str) -> int:
    """Rank 0 of a worker: finish the step and write its record (outputs present, output
    contracts, content digests); the exit status."""
    from mlpipe.version import __version__

    header = {"mlpipe_version": __version__, "python": sys.version.split()[0],
              "component": request["function"], "component_digest": request.get("digest"),
              "compiled_digest": request.get("compiled_digest"), "started_at": started,
              "inputs": body.inputs_checked}
    if request.get("describe_interpreter"):
        from mlpipe.environments import interpreter_evidence

        header["interpreter"] = interpreter_evidence()
    try:
        step = finish.finish(record.folder(), me=part.data, outputs=body.outputs,
                             paths=request["outputs"], header=header, failure=body.failure,
                             reads=body.reads)
    except OSError as exc:
        print(f"mlpipe: the step record could not be written: {exc}", file=sys.stderr)
        return body.code or 1
    if step["failure"] is not None and body.code == 0:
        print(f"mlpipe: {step['failure']['message']}", file=sys.stderr)
        return 1
    return body.code


def end_process(code: int) -> None:
    """End this step's process with ``code`` once its record is written: non-daemon threads
    joined and ``atexit`` handlers run, as interpreter exit does, then ``os._exit``, so that
    C++ teardown (a gloo process group's worker threads destroyed at exit: "terminate called
    without an active exception") cannot turn a finished rank into a failed one."""
    import atexit
    import threading

    shutdown = getattr(threading, "_shutdown", None)
    if shutdown is not None:
        shutdown()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


if __name__ == "__main__":
    end_process(main())
