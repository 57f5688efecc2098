"""Export of a spec read from Azure ML YAML: its documents written back as they were read.

Every field reaches Azure ML as written, including those mlpipe does not model (modes, output
paths and registrations, identity, services, limits, queue settings, settings such as
``continue_on_step_failure``, the fields of sweep, parallel, Spark, AutoML and data transfer
jobs). What changes: relative paths (``code``, data ``path``, conda files, build contexts,
additional includes) are rebased to the output folder, component files are written under
``components/`` and referenced there, and only what the caller asks for is set (input values,
the default compute, the experiment) plus mlpipe's own tags (``mlpipe.*``). Never imports
azure-ai-ml and never judges wiring.
"""
from __future__ import annotations

import copy
import os
import posixpath
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mlpipe.backends.azure import nodes, vocabulary, yamlfile
from mlpipe.backends.azure.jobkinds import job_kind_named
from mlpipe.errors import ExportError
from mlpipe.paths import cloud_reference, lexical, rebased
from mlpipe.spec import ComponentSpec, PipelineSpec

COMPONENT_DIR = "components"
#: Fields that name a component file (or an inline component), by where they appear.
_COMPONENT_REFS = ("component", "trial")
#: Fields of a component (or an inline job) that hold a local path relative to its file.
_PATH_FIELDS = ("code",)


def job_file(spec: PipelineSpec) -> str:
    """The file an imported spec is written to: ``job.yml`` for a single job (command, sweep,
    AutoML; whatever the spelling of its type, or none), ``pipeline.yml`` for a pipeline."""
    kind = vocabulary.job_kind(spec.origin.document) if spec.origin is not None else None
    entry = job_kind_named(kind)
    return "pipeline.yml" if entry is None else entry.file_name


def written_back(spec: PipelineSpec, out_dir: Path, given: Mapping[str, Any],
                 default_compute: str | None, tags: Mapping[str, str],
                 experiment: str | None) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """``(job document, {relative path: document})`` for ``spec`` (read from YAML), to be
    written under ``out_dir``.

    Raises:
        ExportError: an input the job does not have, or a component file that was not read
            with the pipeline.
    """
    origin = spec.origin
    assert origin is not None
    docs = _read_documents(spec)
    writer = _Writer(lexical(out_dir), docs)
    top = job_file(spec)
    doc = origin.thawed()
    writer.pipeline(doc, Path(origin.file), top)
    _set_inputs(doc, spec, given)
    if default_compute:
        ref = _compute_ref(default_compute)
        if "compute" in doc and not (doc.get("settings") or {}).get("default_compute"):
            doc["compute"] = ref
        else:
            doc.setdefault("settings", {})["default_compute"] = ref
    if experiment:
        doc["experiment_name"] = experiment
    if tags:
        doc["tags"] = {**(doc.get("tags") or {}), **tags}
    return doc, {top: doc, **writer.files}


def component_written_back(spec: ComponentSpec, out_dir: Path, rel: str) -> dict[str, Any]:
    """The document of a component loaded from YAML (``load_component``) as written to
    ``out_dir/rel``: its own document with relative paths rebased."""
    assert spec.origin is not None
    doc = spec.origin.thawed()
    _Writer(lexical(out_dir), {}).component(doc, Path(spec.origin.file), rel)
    return doc


def _read_documents(spec: PipelineSpec | ComponentSpec) -> dict[Path, Any]:
    """Every document read with the pipeline, by file: the export writes what was checked."""
    found: dict[Path, Any] = {}

    def walk(item: PipelineSpec | ComponentSpec) -> None:
        if item.origin is not None:
            found.setdefault(Path(item.origin.file), item.origin)
        if isinstance(item, PipelineSpec):
            for step in item.steps:
                walk(step.target)

    walk(spec)
    return found


def _compute_ref(name: str) -> str:
    name = name.removeprefix("azureml:")
    return name if name == "serverless" else f"azureml:{name}"


def _set_inputs(doc: dict[str, Any], spec: PipelineSpec, given: Mapping[str, Any]) -> None:
    inputs = doc.get("inputs")
    declared: dict[str, Any] = inputs if isinstance(inputs, dict) else {}
    for name, value in given.items():
        if name not in declared:
            raise ExportError(f"pipeline {spec.name!r} has no input {name!r}",
                              hint=f"its inputs are: {', '.join(declared) or 'none'}")
        entry = declared[name]
        text = _given_value(value)
        if isinstance(entry, dict) and ("path" in entry or entry.get("type") in
                                        vocabulary.ASSET_TYPES or "mode" in entry):
            entry["path"] = _given_path(text)
        elif isinstance(entry, dict):
            entry["value" if "value" in entry else "default"] = text
        else:
            declared[name] = text


def _given_value(value: Any) -> Any:
    """A value given on the command line as YAML reads it (``5`` an integer, ``x`` text)."""
    if not isinstance(value, str):
        return value
    import yaml

    try:
        parsed = yaml.safe_load(value)
    except yaml.YAMLError:
        return value
    return parsed if isinstance(parsed, (bool, int, float, str)) else value


def _given_path(value: Any) -> Any:
    # a local path given on the command line is relative to where the user stands
    if isinstance(value, str) and cloud_reference(value) is None and not os.path.isabs(value):
        return os.path.abspath(value)
    return value


class _Writer:
    """Rebases one export's documents and collects the component files it writes."""

    def __init__(self, out_dir: Path, docs: dict[Path, Any]) -> None:
        self.out_dir = out_dir
        self.docs = docs
        self.files: dict[str, dict[str, Any]] = {}
        self.written: dict[Path, str] = {}

    # --- paths --------------------------------------------------------------------------------

    def path(self, value: Any, source: Path, rel: str) -> Any:
        """A local relative path written in ``source``, as written from ``out_dir/rel``."""
        if not isinstance(value, str) or not value or os.path.isabs(value):
            return value
        if cloud_reference(value) is not None or "${{" in value:
            return value
        moved = Path(rebased(source.parent / value, (self.out_dir / rel).parent)).as_posix()
        if value.endswith("/") and not moved.endswith("/"):
            moved += "/"
        return moved

    def data(self, entry: Any, source: Path, rel: str) -> None:
        """Rebase the ``path`` of every data value in an ``inputs``/``outputs`` mapping."""
        if not isinstance(entry, dict):
            return
        for _key, value in entry.items():
            if isinstance(value, dict) and "path" in value and \
                    nodes.expression(value["path"]) is None:
                value["path"] = self.path(value["path"], source, rel)

    # --- documents ----------------------------------------------------------------------------

    def pipeline(self, doc: dict[str, Any], source: Path, rel: str) -> None:
        """A pipeline job or pipeline component document, rebased for ``out_dir/rel``."""
        if "jobs" not in doc and (vocabulary.job_kind(doc) in vocabulary.STANDALONE_KINDS
                                  or "component" in doc):
            # a single job, or a pipeline job that runs a pipeline component; a standalone
            # AutoML job's data paths are relative to where it is submitted from (azure-ai-ml
            # gives the job the working folder as its base), so they are kept as written
            self.job(doc, source, rel, automl_data=vocabulary.job_kind(doc) != "automl")
            return
        self.data(doc.get("inputs"), source, rel)
        self.data(doc.get("outputs"), source, rel)
        for _name, node in (doc.get("jobs") or {}).items():
            if isinstance(node, dict):
                self.job(node, source, rel)

    def job(self, node: dict[str, Any], source: Path, rel: str, *,
            automl_data: bool = True) -> None:
        """One job of a pipeline: its data paths, its component (file or inline), and the
        paths of an inline job (code, environment, a parallel job's task)."""
        self.data(node.get("inputs"), source, rel)
        self.data(node.get("outputs"), source, rel)
        for key in nodes.AUTOML_DATA if automl_data else ():
            if isinstance(node.get(key), dict) and "path" in node[key]:
                node[key]["path"] = self.path(node[key]["path"], source, rel)
        for key in _COMPONENT_REFS:
            ref = node.get(key)
            if isinstance(ref, dict):
                if ref.get("type") == "pipeline" or "jobs" in ref:
                    self.pipeline(ref, source, rel)
                else:
                    self.component(ref, source, rel)
            elif isinstance(ref, str) and cloud_reference(ref.removeprefix("file:")) is None:
                prefix = "file:" if ref.startswith("file:") else ""
                file = lexical(source.parent / ref.removeprefix("file:"))
                if file not in self.docs and _is_flow(file):
                    # a prompt flow is its folder (its nodes' code beside it): referenced
                    # where it is, never copied
                    node[key] = prefix + self.path(ref.removeprefix("file:"), source, rel)
                    continue
                written = self.copy(file)
                node[key] = prefix + _relative(written, rel)
        self.component(node, source, rel, inline_job=True)

    def component(self, doc: dict[str, Any], source: Path, rel: str, *,
                  inline_job: bool = False) -> None:
        """The local paths of a component document (or of an inline job's own fields)."""
        for holder in (doc, doc.get("task")):  # a parallel component's task has its own
            if isinstance(holder, dict):
                for key in _PATH_FIELDS:
                    if key in holder:
                        holder[key] = self.path(holder[key], source, rel)
                self.environment(holder, source, rel)
        includes = doc.get("additional_includes")
        if isinstance(includes, list):
            doc["additional_includes"] = [self.path(i, source, rel) for i in includes]
        if not inline_job and "jobs" in doc:
            self.pipeline(doc, source, rel)

    def environment(self, holder: dict[str, Any], source: Path, rel: str) -> None:
        env = holder.get("environment")
        if isinstance(env, str) and env.startswith("file:"):  # its own YAML file
            holder["environment"] = "file:" + self.path(env.removeprefix("file:"), source, rel)
            return
        if not isinstance(env, dict):
            return
        if isinstance(env.get("conda_file"), str):
            env["conda_file"] = self.path(env["conda_file"], source, rel)
        build = env.get("build")
        if isinstance(build, dict) and isinstance(build.get("path"), str):
            build["path"] = self.path(build["path"], source, rel)

    def copy(self, file: Path) -> str:
        """Write (once) the component file ``file``, rebased; its path under ``out_dir``."""
        done = self.written.get(file)
        if done is not None:
            return done
        origin = self.docs.get(file)
        if origin is None:
            raise ExportError(f"{file} was not read with the pipeline, so it cannot be written",
                              hint="this is a bug in the export; report it")
        stem = file.stem
        rel = f"{COMPONENT_DIR}/{stem}.yml"
        n = 2
        while rel in self.files:
            rel = f"{COMPONENT_DIR}/{stem}-{n}.yml"
            n += 1
        self.written[file] = rel
        doc = origin.thawed()
        self.files[rel] = doc
        if doc.get("type") == "pipeline" or "jobs" in doc:
            self.pipeline(doc, file, rel)
        else:
            self.component(doc, file, rel)
        includes = file.with_suffix(".additional_includes")
        if includes.exists():
            lines = includes.read_text(encoding="utf-8").splitlines()
            moved = [self.path(line.strip(), file, rel) if line.strip() else line
                     for line in lines]
            self.files[rel[:-len(".yml")] + ".additional_includes"] = {"__text__": moved}
        return rel


def _is_flow(file: Path) -> bool:
    try:
        return vocabulary.prompt_flow(yamlfile.fast_load(file), file.name) is not None
    except Exception:  # unreadable here: the import read it, so it is not a flow
        return False


def _relative(written: str, here: str) -> str:
    ref = posixpath.relpath(written, posixpath.dirname(here) or ".")
    return ref if ref.startswith(".") else f"./{ref}"


def write_document(path: Path, doc: Any) -> Path:
    """Write one document (YAML; an ``additional_includes`` list as its lines) to ``path``."""
    if isinstance(doc, dict) and set(doc) == {"__text__"}:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(doc["__text__"]) + "\n", encoding="utf-8")
        return path
    return yamlfile.write(path, copy.deepcopy(doc))


__all__ = ["COMPONENT_DIR", "component_written_back", "job_file", "write_document",
           "written_back"]
