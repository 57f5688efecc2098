"""azure-ai-ml Python pipelines: ``FILE.py:NAME`` where NAME is an azure-ai-ml
``@dsl.pipeline``, a ``PipelineJob`` (``job = my_pipeline(...)``) or a function returning one,
read as mlpipe reads the same job in YAML.

azure-ai-ml builds the ``PipelineJob`` offline (as ``ml_client.jobs.create_or_update(job)``
would be given it, contacting nothing); the job document it would submit
(``sdk_body``) is written to the user's cache, keyed by its whole content, and read by the YAML
importer, so every check, the export and the local launcher treat it as they treat a job file.
What mlpipe reports points back at the user's Python file: a step's line is the line that
assigns the node azure-ai-ml names after (``train = fit(data=...)`` names the node ``train``),
anything else the function's ``def`` (or the job's assignment).

Imports azure-ai-ml only through the user's own module and inside the functions.
"""
from __future__ import annotations

import ast
import contextlib
import dataclasses
import os
import re
import sys
from pathlib import Path
from typing import Any

from mlpipe.diagnostics import Diagnostic
from mlpipe.digests import digest_bytes
from mlpipe.errors import LoadError, MlpipeError
from mlpipe.paths import derived_root, display_path
from mlpipe.spec import Location, PipelineSpec, StepSpec


def is_sdk_pipeline(value: Any) -> bool:
    """Whether ``value`` is a function decorated with azure-ai-ml's ``@dsl.pipeline``."""
    return callable(value) and getattr(value, "_is_dsl_func", False) is True


def is_sdk_job(value: Any) -> bool:
    """Whether ``value`` is an azure-ai-ml ``PipelineJob`` (without importing azure-ai-ml)."""
    return type(value).__name__ == "PipelineJob" and \
        type(value).__module__.startswith("azure.ai.ml.")


def is_sdk_target(value: Any) -> bool:
    """Whether ``value`` names an azure-ai-ml pipeline: an ``@dsl.pipeline`` function, a
    ``PipelineJob`` (``job = my_pipeline(...)``), or a plain function of a module that uses
    azure-ai-ml (one that returns the job, as the notebooks' ``generate_dsl_pipeline()``)."""
    import inspect

    return is_sdk_pipeline(value) or is_sdk_job(value) or (
        inspect.isfunction(value) and _uses_azure_ai_ml(value.__globals__))


def _uses_azure_ai_ml(names: dict[str, Any]) -> bool:
    """Whether a module's names include something of azure-ai-ml (``from azure.ai.ml import
    dsl``): its functions may build jobs; another module's are not called."""
    for value in names.values():
        where = value.__name__ if _is_module(value) else getattr(value, "__module__", None)
        if isinstance(where, str) and (where == "azure.ai.ml" or
                                       where.startswith("azure.ai.ml.")):
            return True
    return False


def _is_module(value: Any) -> bool:
    import types

    return isinstance(value, types.ModuleType)


def load_sdk_pipeline(target: Any, path: str, name: str
                      ) -> tuple[PipelineSpec, list[Diagnostic]]:
    """The spec of the azure-ai-ml pipeline ``target`` (``name`` in the file ``path``): an
    ``@dsl.pipeline`` function (called with no arguments: an input it declares and nobody
    binds is the pipeline's input, given at submission), a ``PipelineJob`` or a function
    returning one; and the diagnostics its import found, located in ``path``.

    Raises:
        LoadError: building the job raises, builds something other than a pipeline job, or
            holds a node mlpipe cannot read; located in ``path`` (the line of the node or of
            the function).
    """
    from mlpipe.backends.azure import yamlfile
    from mlpipe.backends.azure.importer import load_pipeline_yaml
    from mlpipe.backends.azure.sdk_body import relative_local_paths, submitted_document
    from mlpipe.backends.azure.validate import quiet_azure_ai_ml

    quiet_azure_ai_ml()
    lines = _node_lines(path)
    def_line = lines.get(("", name)) or lines.get(("<module>", name))
    job = _built(target, path, name, def_line)
    try:
        with contextlib.redirect_stdout(sys.stderr):  # azure-ai-ml's own notices too
            doc = submitted_document(job, name)
    except LoadError as err:
        node = re.search(r"node '([^']+)'", err.message)
        where = _Where("", display_path(path), lines, name, def_line)
        err.file, err.line = display_path(path), where.line(node[1] if node else None)
        err.hint = err.hint or ("leave that node out of what mlpipe reads (give a pipeline "
                                "without it), or run the job with azure-ai-ml directly")
        err.args = (err.render(),)
        raise
    doc.setdefault("display_name", name)
    _declare_untyped_inputs(doc, doc.get("inputs") or {})
    # a nested pipeline is a component file, as azure-ai-ml loads it back (not inline)
    files: dict[str, Any] = {}
    _externalize(doc, files)
    stem = f"{Path(path).stem}.{name}.yml"
    # every written folder is one level under the cache: a path relative to it is the same
    # text whichever folder the content names, and compile rebases it to its output folder
    placeholder = cache_folder() / "_"
    for rel, content in [*files.items(), (stem, doc)]:
        relative_local_paths(content, (placeholder / rel).parent)
    texts = {rel: yamlfile.dump(content) for rel, content in [*files.items(), (stem, doc)]}
    # keyed by everything written (every nested pipeline's content too): an edit anywhere
    # in what azure-ai-ml builds is a new folder, never a stale read
    key = digest_bytes("\n".join(f"{rel}\n{text}" for rel, text in sorted(texts.items()))
                       .encode())
    folder = cache_folder() / key.removeprefix("sha256:")[:24]
    written = folder / stem
    try:
        folder.parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # this user's alone
        for rel, text in texts.items():
            target_file = folder / rel
            if not target_file.exists():
                target_file.parent.mkdir(parents=True, exist_ok=True)
                partial = target_file.with_suffix(f".{os.getpid()}.tmp")
                partial.write_text(text, encoding="utf-8")
                os.replace(partial, target_file)
    except OSError as exc:
        raise LoadError(f"cannot write the job azure-ai-ml built for {name} under "
                        f"{folder.parent}: {exc.strerror or exc}",
                        hint="set XDG_CACHE_HOME to a folder this user can write",
                        file=display_path(path), line=def_line) from exc
    try:
        imported = load_pipeline_yaml(str(written))
    except LoadError as err:
        err.message = _unwritten(err.message, written, display_path(path))
        err.hint = err.hint and _unwritten(err.hint, written, display_path(path))
        err.file, err.line = display_path(path), def_line
        err.args = (err.render(),)
        raise
    where = _Where(str(written), display_path(path), lines, name, def_line,
                   _sources(getattr(job, "jobs", None)))
    spec = where.spec(imported.spec, name)
    return spec, [where.diagnostic(d) for d in imported.diagnostics]


def cache_folder() -> Path:
    """Where the YAML of azure-ai-ml Python pipelines is written: the user's own cache
    (``$XDG_CACHE_HOME/mlpipe-sdk``, else ``~/.cache/mlpipe-sdk``), never a folder other
    users share."""
    return derived_root()


def _built(target: Any, path: str, name: str, def_line: int | None) -> Any:
    """The ``PipelineJob`` that ``target`` is or builds, the user's prints kept off stdout."""
    import inspect

    if is_sdk_job(target):
        return target
    if not is_sdk_pipeline(target):
        required = [p.name for p in inspect.signature(target).parameters.values()
                    if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        if required:
            raise LoadError(f"{name}() needs the argument(s) {', '.join(required)}, so mlpipe "
                            f"cannot build the job it returns",
                            hint=f"assign the job at module level (job = {name}(...)) and "
                                 f"name it as {display_path(path)}:job, or name the "
                                 f"@dsl.pipeline function",
                            file=display_path(path), line=def_line)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            job = target()
    except MlpipeError:
        raise
    except Exception as exc:  # what the user's function or azure-ai-ml raised while building
        from mlpipe.backends.azure.reasons import refusal_reason

        file, line = _frame_in(exc, path)
        raise LoadError(f"azure-ai-ml could not build the pipeline job of {name}(): "
                        f"{type(exc).__name__}: {refusal_reason(exc)}",
                        hint=f"fix {name} (or what it calls) so that {name}() builds a "
                             f"PipelineJob, as ml_client.jobs.create_or_update({name}()) "
                             f"would", file=display_path(file), line=line or def_line) from exc
    if not is_sdk_job(job):
        raise LoadError(f"{name}() built a {type(job).__name__}, not an azure-ai-ml pipeline "
                        f"job", hint="give a function decorated with @dsl.pipeline, a "
                                     "function that returns its PipelineJob, or the job",
                        file=display_path(path), line=def_line)
    return job


class _Where:
    """Maps locations in the written YAML to the user's Python files: a nested
    ``@dsl.pipeline`` defined in another module is located in that module."""

    def __init__(self, written: str, path: str, lines: dict[tuple[str, str], int],
                 function: str, def_line: int | None,
                 elsewhere: dict[str, str] | None = None) -> None:
        self.written, self.path, self.lines = written, path, lines
        self.function, self.def_line = function, def_line
        self.elsewhere = elsewhere or {}
        self.prefixes: dict[str, _Where] = {}  # a nested step's dotted name -> its file's

    def nested(self, function: str) -> _Where:
        source = self.elsewhere.get(function)
        if source is None or display_path(source) == self.path:
            return self
        lines = _node_lines(source)
        found = _Where(self.written, display_path(source), lines, function,
                       lines.get(("", function)), self.elsewhere)
        found.prefixes = self.prefixes
        return found

    def mine(self, file: str | None) -> bool:
        """Whether ``file`` is one of the YAML files written for the pipeline."""
        return file is not None and os.path.abspath(file).startswith(
            os.path.dirname(os.path.abspath(self.written)) + os.sep)

    def line(self, step: str | None, function: str | None = None) -> int | None:
        step = step.rsplit(".", 1)[-1] if step else step  # a nested node: its own name
        if step:
            for key in ((function or self.function, step), *[
                    k for k in self.lines if k[1] == step]):
                if key in self.lines:
                    return self.lines[key]
        return self.def_line

    def diagnostic(self, d: Diagnostic) -> Diagnostic:
        if not self.mine(d.file):
            return d
        owner = self
        if d.step:
            inside = [p for p in self.prefixes if d.step.startswith(p + ".")]
            owner = self.prefixes[max(inside, key=len)] if inside else self
        return dataclasses.replace(
            d, file=owner.path, line=owner.line(d.step),
            message=_unwritten(d.message, Path(self.written), owner.path),
            hint=d.hint and _unwritten(d.hint, Path(self.written), owner.path))

    def location(self, loc: Location | None, step: str | None,
                 function: str | None) -> Location | None:
        if loc is None or not self.mine(loc.file):
            return loc
        return Location(self.path, self.line(step, function) or 1)

    def spec(self, spec: PipelineSpec, function: str, prefix: str = "") -> PipelineSpec:
        steps = tuple(self.step(s, function, prefix) for s in spec.steps)
        return dataclasses.replace(
            spec, steps=steps, location=Location(self.path, self.line(None) or 1),
            inputs=tuple(dataclasses.replace(i, location=self.location(
                i.location, None, function)) for i in spec.inputs))

    def step(self, step: StepSpec, function: str, prefix: str = "") -> StepSpec:
        target = step.target
        if isinstance(target, PipelineSpec):
            # a sub-pipeline's nodes are assigned in its own function (named like it),
            # which may be in another module
            inner = self.nested(target.name)
            self.prefixes[f"{prefix}{step.name}"] = inner
            target = inner.spec(target, target.name, f"{prefix}{step.name}.")
        # a component keeps its place in the written YAML (the checks' hints then speak
        # azure-ai-ml's terms); the step, which diagnostics point at, is the user's line
        return dataclasses.replace(step, target=target,
                                   location=self.location(step.location, step.name, function))


def _unwritten(text: str, written: Path, path: str) -> str:
    """``text`` naming the user's file where it names mlpipe's written YAML (never a help
    pointing at mlpipe's own cache): the pipeline's file, or a nested one by its name."""
    text = text.replace(str(written), path).replace(display_path(str(written)), path)
    return text.replace(f"{written.parent}{os.sep}", "").replace(
        f"{display_path(str(written.parent))}{os.sep}", "")


def _sources(jobs: Any, found: dict[str, str] | None = None) -> dict[str, str]:
    """Each nested ``@dsl.pipeline``'s component name -> the file that defines it."""
    found = {} if found is None else found
    for node in (jobs or {}).values():
        component = getattr(node, "component", None)
        source = getattr(component, "_source_path", None)
        if getattr(node, "type", None) == "pipeline" and component is not None:
            if isinstance(source, str) and source.endswith(".py"):
                found.setdefault(str(getattr(component, "name", "")), source)
            _sources(getattr(component, "jobs", None), found)
    return found


def _node_lines(path: str) -> dict[tuple[str, str], int]:
    """``(function, variable) -> line`` of each assignment in each function of ``path``, and
    ``("", function) -> line`` of each function's ``def`` (azure-ai-ml names a node after the
    variable it is assigned to)."""
    try:
        tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return {}
    found: dict[tuple[str, str], int] = {}
    for node in tree.body:  # ``job = my_pipeline(...)``: the job's own line
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    found.setdefault(("<module>", target.id), node.lineno)
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        first = min([d.lineno for d in fn.decorator_list] + [fn.lineno])
        found.setdefault(("", fn.name), first)
        for node in ast.walk(fn):
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
                targets = [node.target]
            else:
                continue
            for target in targets:
                if isinstance(target, ast.Name):
                    found.setdefault((fn.name, target.id), node.lineno)
    return found


def _frame_in(exc: BaseException, path: str) -> tuple[str, int | None]:
    import traceback

    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if os.path.abspath(f.filename) == os.path.abspath(path)]
    return (path, frames[-1].lineno) if frames else (path, None)


def _externalize(pipeline: Any, files: dict[str, Any], depth: int = 0) -> None:
    """Each inline pipeline component of ``pipeline`` moved to ``components/NAME.yml`` (its
    own nested ones beside it) and referenced there."""
    for node in (pipeline.get("jobs") or {}).values():
        comp = node.get("component") if isinstance(node, dict) else None
        if not isinstance(comp, dict) or comp.get("type") != "pipeline":
            continue
        _externalize(comp, files, depth + 1)
        stem = re.sub(r"[^A-Za-z0-9_.-]", "_", str(comp.get("name") or "pipeline"))
        rel, n = f"components/{stem}.yml", 2
        while rel in files and files[rel] != comp:
            rel, n = f"components/{stem}-{n}.yml", n + 1
        files[rel] = comp
        node["component"] = f"./{rel}" if depth == 0 else f"./{rel.split('/', 1)[1]}"


def _declare_untyped_inputs(pipeline: Any, scope: Any) -> None:
    """An inline pipeline component's inputs that azure-ai-ml leaves out of its dict (an
    unannotated parameter of a nested ``@dsl.pipeline`` has no type), declared with the type
    of what its node binds to them, so that the import reads the nesting as azure-ai-ml built
    it."""
    for node in (pipeline.get("jobs") or {}).values():
        comp = node.get("component") if isinstance(node, dict) else None
        if not isinstance(comp, dict) or comp.get("type") != "pipeline":
            continue
        declared = comp.get("inputs") or {}
        for key, given in (node.get("inputs") or {}).items():
            if key not in declared:
                declared[key] = {"type": _bound_type(given, scope)}
        if declared:
            comp["inputs"] = declared
        _declare_untyped_inputs(comp, declared)


def _bound_type(given: Any, scope: Any) -> str:
    value = given.get("path", given.get("value")) if isinstance(given, dict) else given
    if isinstance(given, dict) and given.get("type"):
        return str(given["type"])
    m = re.fullmatch(r"\$\{\{\s*parent\.inputs\.(\w+)\s*\}\}", str(value))
    if m is not None:
        entry = scope.get(m[1]) if isinstance(scope, dict) else None
        if isinstance(entry, dict) and entry.get("type"):
            return str(entry["type"])
        if isinstance(entry, dict) and "path" in entry:
            return "uri_folder"
        value = entry.get("default", entry.get("value")) if isinstance(entry, dict) else entry
    elif "${{" in str(value):
        return "uri_folder"  # a sibling's output
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    return "string"


__all__ = ["cache_folder", "is_sdk_job", "is_sdk_pipeline", "is_sdk_target", "load_sdk_pipeline"]
