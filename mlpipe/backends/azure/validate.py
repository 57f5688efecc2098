"""Offline validation of an export with azure-ai-ml itself: every component file, and the
pipeline job as its skeleton (one job of each form, ``skeleton``).

The only module of the export path that imports azure-ai-ml (inside the function); it
neither writes nor contacts Azure.
"""
from __future__ import annotations

import contextlib
import gc
import importlib
import importlib.util
import io
import json
import logging
import os
import re
import signal
import sys
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mlpipe.backends.azure import yamlfile
from mlpipe.backends.azure.reasons import refusal_reason
from mlpipe.backends.azure.skeleton import Skeleton, skeleton
from mlpipe.errors import ExportError


def quiet_azure_ai_ml() -> None:
    """Import azure-ai-ml and keep its notices ("Class X: This is an experimental class ...",
    printed when it builds its schemas) off the user's terminal; its errors still show.

    azure-ai-ml sets its logger to INFO with its own stderr handler when it is imported, so
    the level is set after the import, not before.
    """
    with uncollected():
        import azure.ai.ml  # noqa: F401  (its import installs the handler quieted below)
    _quiet()


@contextlib.contextmanager
def uncollected() -> Iterator[None]:
    """The cyclic garbage collector off for the block: azure-ai-ml's import builds its
    schemas out of some hundred thousand objects, and the collector, run again and again
    while they are made, finds next to no garbage among them and costs a fifth of the import
    (measured: 1.5-1.8 s of CPU against 1.15-1.43 s)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _quiet() -> None:
    logging.getLogger("azure.ai.ml").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", module=r"azure\.ai\.ml.*")


def loaders() -> tuple[Any, Any]:
    """azure-ai-ml's own ``load_job`` and ``load_component``, quieted as ``quiet_azure_ai_ml``
    does, imported without running the package's ``__init__`` where azure-ai-ml is not yet
    imported: that ``__init__`` imports ``MLClient`` and every operations class (the storage
    and HTTP clients, JWT; about 40 % of the import), none of which loading or validating a
    file uses. A name the ``__init__`` re-exports (``from azure.ai.ml import MLClient``) is
    its own module's object, and one the ``__init__`` defines itself runs it, whole
    (``defer_init``), so the rest of the process sees the package's names as they always are.
    """
    if "azure.ai.ml" not in sys.modules:
        defer_init("azure.ai.ml")
    with uncollected():
        try:
            from azure.ai.ml.entities._load_functions import load_component, load_job
        except ImportError:  # an azure-ai-ml that moved them: the package's own names
            from azure.ai.ml import load_component, load_job
    _quiet()
    return load_job, load_component


def defer_init(name: str) -> None:
    """Put the package ``name`` in ``sys.modules`` without running its ``__init__``: its
    submodules import as usual, and a name the ``__init__`` imports from a submodule
    (``from .entities._inputs_outputs import Input``) is that submodule's own object. Only a
    name the ``__init__`` defines itself runs the ``__init__``, whole (quieted again: it sets
    azure-ai-ml's logger to INFO)."""
    spec = importlib.util.find_spec(name)
    if (spec is None or spec.loader is None or spec.origin is None
            or spec.submodule_search_locations is None):
        return
    try:
        reexports = _reexports(Path(spec.origin).read_text(encoding="utf-8"), name)
    except (OSError, SyntaxError, ValueError):
        return
    module = importlib.util.module_from_spec(spec)
    loader = spec.loader

    def getattr_(attr: str) -> Any:
        if attr in reexports:
            source, original = reexports[attr]
            # ``from . import sub`` names a submodule of the package itself
            value = (importlib.import_module(f"{name}.{original}") if source == name
                     else getattr(importlib.import_module(source), original))
            setattr(module, attr, value)
            return value
        if not attr.startswith("__"):
            try:
                return importlib.import_module(f"{name}.{attr}")
            except ModuleNotFoundError as exc:
                if exc.name != f"{name}.{attr}":
                    raise
        vars(module).pop("__getattr__", None)
        loader.exec_module(module)
        _quiet()
        return getattr(module, attr)

    module.__getattr__ = getattr_  # type: ignore[attr-defined]  (PEP 562)
    sys.modules[name] = module
    parent, _, child = name.rpartition(".")
    if parent:
        setattr(sys.modules[parent], child, module)


def _reexports(source: str, package: str) -> dict[str, tuple[str, str]]:
    """``{name: (module, its name there)}`` of each ``from M import N [as A]`` at the top
    level of the package ``__init__`` ``source``."""
    import ast

    found = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.ImportFrom):
            module = importlib.util.resolve_name("." * node.level + (node.module or ""),
                                                 package) if node.level else node.module
            if module and not module.startswith("__"):
                for alias in node.names:
                    if alias.name != "*":
                        found[alias.asname or alias.name] = (module, alias.name)
    return found


def load_export(out_dir: str | os.PathLike[str], pipeline_file: str = "pipeline.yml") -> Any:
    """The ``PipelineJob`` azure-ai-ml loads from ``out_dir/pipeline.yml``.

    Raises:
        ExportError: azure-ai-ml rejects a file, with its message.
    """
    load_job, _ = loaders()
    path = Path(out_dir) / pipeline_file
    try:
        return load_job(path)
    except Exception as exc:  # marshmallow.ValidationError, ValidationException, YAML errors
        raise ExportError(f"azure-ai-ml cannot load {path}: {_first_line(exc)}",
                          hint="this is a bug in the export if mlpipe wrote the file; report it",
                          file=str(path)) from exc


def validate_export(out_dir: str | os.PathLike[str], pipeline_file: str = "pipeline.yml"
                    ) -> Skeleton:
    """Validate ``out_dir/pipeline.yml`` and every component YAML with azure-ai-ml offline (what
    ``az ml job validate`` checks without a workspace): each component file loaded and
    validated once, and the pipeline job as its skeleton, one job of each form
    (``skeleton``), which azure-ai-ml accepts exactly when it accepts the whole job.

    Returns:
        The skeleton validated (``stands_for``: which jobs each validated job stood for).

    Raises:
        ExportError: a file does not load, or validation reports problems (all of them).

    Example:
        >>> validate_export("build/").jobs
        1000
    """
    _validate_components(out_dir)
    path = Path(out_dir) / pipeline_file
    try:
        document = yamlfile.fast_load(path)
    except Exception as exc:  # YAML errors, unreadable file
        raise ExportError(f"azure-ai-ml cannot load {path}: {_first_line(exc)}",
                          hint="this is a bug in the export if mlpipe wrote the file; report it",
                          file=str(path)) from exc
    if not isinstance(document, dict):
        load_export(out_dir, pipeline_file)  # azure-ai-ml's own message for what it is
        raise ExportError(f"azure-ai-ml cannot load {path}: not a pipeline job", file=str(path))
    kept = skeleton(document)
    load_job, _ = loaders()
    try:
        job = load_job(io.StringIO(yamlfile.dump(kept.pipeline)), relative_origin=str(path))
    except Exception as exc:
        raise ExportError(f"azure-ai-ml cannot load {path}: {_first_line(exc)}"
                          f"{_also(kept, str(exc))}",
                          hint="this is a bug in the export if mlpipe wrote the file; report it",
                          file=str(path)) from exc
    validate = getattr(job, "_validate", None)
    if validate is not None:  # a sweep or AutoML job has only its schema, checked above
        _raise_if_failed(validate(), path, kept)
    return kept


def validate_export_fully(out_dir: str | os.PathLike[str], pipeline_file: str = "pipeline.yml"
                          ) -> Any:
    """What ``validate_export`` checks, the long way: azure-ai-ml loads and validates every
    job of the pipeline (a second or more per hundred jobs). The tests hold the two equal.

    Returns:
        The loaded ``PipelineJob``.

    Raises:
        ExportError: a file does not load, or validation reports problems (all of them).
    """
    job = load_export(out_dir, pipeline_file)
    _validate_components(out_dir)
    if hasattr(job, "_validate"):
        _raise_if_failed(job._validate(), Path(out_dir) / pipeline_file)
    return job


def _validate_components(out_dir: str | os.PathLike[str]) -> None:
    _, load_component = loaders()
    for path in sorted((Path(out_dir) / "components").glob("*.yml")):
        try:
            component = load_component(path)
        except Exception as exc:
            if _loads_in_a_job(path):
                continue  # load_job reads it in the pipeline, as Azure ML's own CI does
            raise ExportError(f"azure-ai-ml cannot load {path}: {_first_line(exc)}",
                              file=str(path)) from exc
        _raise_if_failed(component._validate(), path)


def _loads_in_a_job(path: Path) -> bool:
    """Whether azure-ai-ml's ``load_job`` accepts the component file as a job's component:
    it is stricter alone (``load_component`` refuses a name like ``r-iris-example``, which
    a pipeline job referencing the file is accepted with)."""
    load_job, _ = loaders()
    try:
        kind = (yamlfile.fast_load(path) or {}).get("type", "command")
        doc = {"type": "pipeline", "jobs": {"node": {"type": str(kind),
                                                     "component": f"file:./{path.name}"}}}
        load_job(io.StringIO(yamlfile.dump(doc)), relative_origin=str(path))
    except Exception:  # what load_job refuses is refused as load_component said
        return False
    return True


def _also(kept: Skeleton, text: str) -> str:
    """Which other jobs share the form of the jobs ``text`` names (they fail alike)."""
    names = [name for name, alike in kept.stands_for.items()
             if len(alike) > 1 and re.search(rf"\b{re.escape(str(name))}\b", text)]
    if not names:
        return ""
    shown = []
    for name in names:
        others = kept.stands_for[name][1:]
        listed = ", ".join(map(str, others[:5])) + (f" and {len(others) - 5} more"
                                                    if len(others) > 5 else "")
        shown.append(f"{len(others)} more job(s) of {name}'s form: {listed}")
    return " (the same holds for " + "; ".join(shown) + ")"


def _raise_if_failed(result: Any, path: Path, kept: Skeleton | None = None) -> None:
    if result.passed:
        return
    errors = result._to_dict().get("errors", [])
    problems = "; ".join(f"{e.get('path', '?')}: {e.get('message', '')}" for e in errors)
    hint = None
    if any(e.get("message") == "Compute not set" for e in errors):
        hint = "the job names no compute: pass --compute NAME (a cluster, or serverless)"
    also = _also(kept, problems) if kept is not None else ""
    raise ExportError(f"azure-ai-ml's validation rejects {path}: {problems}{also}",
                      file=str(path), hint=hint)


def _first_line(exc: BaseException) -> str:
    """azure-ai-ml's whole reason (each field and message), not its first line ("Validation
    for CommandSchema failed:")."""
    return refusal_reason(exc)


class Validation:
    """``validate_export`` in a process forked before the pipeline is traced, so that the
    import of what validation uses of azure-ai-ml (about a second: ``loaders``) runs on
    another core meanwhile.

    ``start()`` forks (on Linux, from a process without threads; elsewhere, or with
    ``MLPIPE_FORKSERVER=0``, the validation runs in this process when asked). The child
    imports azure-ai-ml, then waits for one request; it ignores Ctrl-C (this process handles
    it) and ends when this process closes its end or dies. Whatever the child cannot answer
    is validated here.

    Example:
        >>> validation = Validation.start()
        >>> ...  # trace, check, write build/
        >>> validation.run("build/").jobs
        1000
    """

    def __init__(self, pid: int | None = None, request: int | None = None,
                 reply: int | None = None) -> None:
        self.pid, self._request, self._reply = pid, request, reply

    @classmethod
    def start(cls) -> Validation:
        if (not sys.platform.startswith("linux") or os.environ.get("MLPIPE_FORKSERVER") == "0"
                or threading.active_count() > 1):  # forking a threaded process is unsafe
            return cls()
        request_r, request_w = os.pipe()
        reply_r, reply_w = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # pragma: no cover (the child: measured by the compile tests' outcome)
            code = 0
            try:
                os.close(request_w)
                os.close(reply_r)
                _serve(request_r, reply_w)
            except BaseException:
                code = 1
            finally:
                os._exit(code)
        os.close(request_r)
        os.close(reply_w)
        return cls(pid, request_w, reply_r)

    def run(self, out_dir: str | os.PathLike[str], pipeline_file: str = "pipeline.yml"
            ) -> dict[str, int]:
        """Validate the written export (as ``validate_export``): ``{"jobs": how many,
        "forms": how many validated}``, or its ExportError."""
        answer = None
        if self.pid is not None and self._request is not None and self._reply is not None:
            try:
                os.write(self._request, json.dumps([os.fspath(out_dir), pipeline_file]).encode())
                os.close(self._request)
                self._request = None
                answer = _read_all(self._reply)
            except OSError:
                answer = None
            self.close()
        if not answer:  # no child, or it died: here, then
            return _summary(validate_export(out_dir, pipeline_file))
        reply = json.loads(answer)
        if "error" in reply:
            raise ExportError(**reply["error"])
        return reply

    def close(self) -> None:
        """Stop the child (if it still runs) and reap it."""
        for fd in (self._request, self._reply):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._request = self._reply = None
        if self.pid is not None:
            with contextlib.suppress(OSError):
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
            self.pid = None


def _summary(kept: Skeleton) -> dict[str, int]:
    return {"jobs": kept.jobs, "forms": len(kept.stands_for)}


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 1 << 16):
        chunks.append(chunk)
    return b"".join(chunks)


def _serve(request_fd: int, reply_fd: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # This process lives for one import and one validation: the cyclic collector would free
    # next to nothing before it exits (its peak memory was the same with it off)
    gc.disable()
    loaders()  # the import (a second or so) this process exists for

    request = _read_all(request_fd)
    if not request:
        return  # the command ended without asking (an error, or --no-validate)
    out_dir, pipeline_file = json.loads(request)
    try:
        reply: dict[str, Any] = _summary(validate_export(out_dir, pipeline_file))
    except ExportError as err:
        reply = {"error": {"message": err.message, "hint": err.hint, "file": err.file,
                           "line": err.line}}
    os.write(reply_fd, json.dumps(reply).encode())
