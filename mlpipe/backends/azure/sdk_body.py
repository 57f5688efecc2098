"""The job document of an azure-ai-ml ``PipelineJob`` as azure-ai-ml would submit it: its
YAML form, corrected field by field from the REST body ``MLClient.jobs.create_or_update``
sends (``PipelineJob._to_rest_object()``, built offline); never contacts a service.

azure-ai-ml's ``_to_dict()`` (its YAML dump) is the shape the importer reads, but it is not
the job it submits: a boolean pipeline input is written as ``0``, a node's display name is
dropped, a cloud URI is written as ``azureml:wasbs://...`` (which reads as a local path), an
input the pipeline declares but nobody bound is left out. Here each of those comes from the
REST body (or the job object it is built from) instead.
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from mlpipe.dsl import COMPONENT_NAME
from mlpipe.errors import LoadError

#: ``azureml:NAME:VERSION`` / ``azureml:NAME@LABEL``: an asset, not a local path.
_ASSET = re.compile(r"^[A-Za-z0-9_][\w.-]*(:[\w.-]+|@[\w.-]+)$")
#: A URI with a scheme (``wasbs://``, ``https://``, ``azureml://``, ``abfss://``).
_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")

#: azure-ai-ml's validation messages for what a submission supplies.
_GIVEN_LATER = re.compile(r"^Compute not set|^Required input '[^']+' for pipeline .* not provided")
#: The node kinds mlpipe carries through, by what azure-ai-ml calls them in the REST body.
CARRIED = {"command", "sweep", "parallel", "spark", "pipeline", "automl", "data_transfer",
           "import", "flow", "do_while", "parallel_for", "if_else"}
#: Components of a carried node kind whose job azure-ai-ml completes only in a workspace.
REFUSED_COMPONENTS = {
    "promptflow_parallel": (
        "runs a prompt flow (a promptflow_parallel component loaded from flow.dag.yaml): "
        "azure-ai-ml registers the flow in a workspace when it submits the job and only then "
        "names it, so the job it builds here holds neither the flow's folder nor its inputs, "
        "and mlpipe can neither check, compile nor run it"),
}


def submitted_document(job: Any, name: str) -> dict[str, Any]:
    """The YAML job document of ``job`` (an azure-ai-ml ``PipelineJob``) as azure-ai-ml
    submits it.

    Raises:
        LoadError: azure-ai-ml cannot build the job's REST body or its YAML form (the message
            names the node, when a node is why).
    """
    _validated(job, name)
    rest = _rest_body(job, name)
    try:
        doc = plain(job._to_dict())
    except Exception as exc:
        raise LoadError(f"azure-ai-ml cannot write the pipeline job of {name} as YAML: "
                        f"{type(exc).__name__}: {exc}") from exc
    for key, field in (("display_name", "displayName"), ("description", "description"),
                       ("experiment_name", "experimentName")):
        if rest.get(field) not in (None, ""):
            doc[key] = rest[field]
    if rest.get("tags"):
        doc["tags"] = dict(rest["tags"])
    doc["inputs"] = _inputs(doc.get("inputs") or {}, rest.get("inputs") or {}, job, "jobInputType")
    _declare_unbound(doc["inputs"], job)
    if not doc["inputs"]:
        del doc["inputs"]
    _nodes(doc.get("jobs") or {}, getattr(job, "jobs", {}) or {})
    absolute_local_paths(doc, Path.cwd())
    return doc


def _validated(job: Any, name: str) -> None:
    """What ``create_or_update`` checks before it sends anything (``job._validate()``, offline):
    a job it would refuse is refused here, the first problem naming its node."""
    try:
        result = job._validate()
        problems = dict(result.error_messages)
    except Exception as exc:
        raise LoadError(f"azure-ai-ml cannot validate the pipeline job of {name}: "
                        f"{type(exc).__name__}: {_first_line(exc)}") from exc
    # what is given at submission is not missing yet: a compute (--compute) and a pipeline
    # input nobody bound (--input NAME=...)
    problems = {k: v for k, v in problems.items() if not _GIVEN_LATER.search(str(v))}
    if result.passed or not problems:
        return
    where, message = next(iter(problems.items()))
    node = re.match(r"jobs\.([^.]+)", where)
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    raise LoadError(
        (f"node {node[1]!r}: " if node else "") + f"azure-ai-ml refuses the pipeline job of "
        f"{name} at {where}: {_first_line(Exception(message))}{more}",
        hint="fix what azure-ai-ml names: ml_client.jobs.create_or_update(job) would refuse "
             "the job the same way")


def _rest_body(job: Any, name: str) -> dict[str, Any]:
    try:
        body = job._to_rest_object().as_dict()
    except Exception as exc:
        raise LoadError(f"azure-ai-ml cannot build the request that would submit the pipeline "
                        f"job of {name}: {type(exc).__name__}: {_first_line(exc)}") from exc
    return body.get("properties") or {}


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [""])[0]


def plain(value: Any) -> Any:
    """azure-ai-ml's dict (OrderedDicts, enums) as plain YAML values."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def _inputs(written: dict[str, Any], rest: dict[str, Any], owner: Any,
            kind_key: str) -> dict[str, Any]:
    """The inputs as submitted: a URI exactly as the REST body carries it, a literal as the
    Python value the job holds (the REST body has its text, ``_to_dict()`` may have changed
    its type: ``False`` -> ``0``)."""
    objects = getattr(owner, "inputs", None) or {}
    out = dict(written)
    for key, entry in rest.items():
        if not isinstance(entry, dict):
            continue
        if "uri" in entry:
            uri = str(entry["uri"])
            if not _URI.match(uri) and not uri.startswith("azureml:") and not os.path.isabs(uri):
                uri = os.path.normpath(Path.cwd() / uri)  # a local path, as _to_dict() gives it
            given = {"type": entry.get(kind_key) or entry.get("job_input_type")
                     or entry.get("jobInputType"), "path": uri}
            if entry.get("mode"):
                given["mode"] = _snake(str(entry["mode"]))
            old = written.get(key)
            if isinstance(old, dict):  # keep what the YAML form adds (a description)
                given = {**{k: v for k, v in old.items() if k not in given}, **given}
            out[key] = {k: v for k, v in given.items() if v is not None}
            continue
        data = getattr(objects.get(key), "_data", None)
        if isinstance(data, (bool, int, float, str)) and not isinstance(written.get(key), dict):
            out[key] = data
    return out


def _snake(text: str) -> str:
    """``ReadOnlyMount`` -> ``ro_mount`` (the REST body's mode, in the YAML's words)."""
    return {"readonlymount": "ro_mount", "readwritemount": "rw_mount", "download": "download",
            "upload": "upload", "direct": "direct", "evalmount": "eval_mount",
            "evaldownload": "eval_download"}.get(text.replace("_", "").lower(), text)


def _declare_unbound(inputs: dict[str, Any], job: Any) -> None:
    """An input the pipeline function declares that nobody bound (``p()`` for
    ``def p(raw: Input(type="uri_folder"))``) is left out of both azure-ai-ml forms; it is
    the pipeline's input all the same, given at submission (``--input raw=...``)."""
    declared = getattr(getattr(job, "component", None), "inputs", None) or {}
    for key, meta in declared.items():
        if key in inputs:
            continue
        kind = getattr(meta, "type", None)
        if kind is None and isinstance(meta, dict):
            kind = meta.get("type")
        entry: dict[str, Any] = {"type": str(kind or "string")}
        if getattr(meta, "optional", None):
            entry["optional"] = True
        inputs[key] = entry


def _nodes(written: dict[str, Any], objects: dict[str, Any]) -> None:
    for key, node in objects.items():
        doc = written.get(key)
        if not isinstance(doc, dict):
            continue
        kind = str(getattr(node, "type", "") or doc.get("type") or "command")
        if kind not in CARRIED:
            raise LoadError(f"node {key!r} is {kind!r}, a node kind azure-ai-ml builds that "
                            f"mlpipe cannot read: it has no step that runs it or checks it")
        component_kind = str(getattr(getattr(node, "component", None), "type", "") or "")
        if component_kind in REFUSED_COMPONENTS:
            raise LoadError(f"node {key!r} {REFUSED_COMPONENTS[component_kind]}")
        try:
            rest = node._to_rest_object()
        except Exception as exc:
            raise LoadError(f"azure-ai-ml cannot build the request for node {key!r} ({kind}): "
                            f"{type(exc).__name__}: {_first_line(exc)}") from exc
        rest = plain(rest if isinstance(rest, dict) else rest.as_dict())
        if rest.get("display_name"):
            doc["display_name"] = rest["display_name"]
        if rest.get("tags"):
            doc["tags"] = {**(doc.get("tags") or {}), **rest["tags"]}
        if isinstance(rest.get("resources"), dict) and rest["resources"]:
            doc["resources"] = {**(doc.get("resources") or {}), **rest["resources"]}
        task, written_task = rest.get("task"), doc.get("task")
        if isinstance(task, dict) and isinstance(written_task, dict) and \
                isinstance(task.get("code"), str):
            # a parallel node's code: the REST body's (resolved against its component's
            # file), not _to_dict()'s azureml:./src (relative to a folder it does not name)
            written_task["code"] = task["code"]
        if isinstance(doc.get("inputs"), dict) and isinstance(rest.get("inputs"), dict):
            doc["inputs"] = _inputs(doc["inputs"], rest["inputs"], node, "job_input_type")
        if isinstance(doc.get("outputs"), dict):
            _outputs(doc["outputs"], getattr(node, "outputs", None) or {})
        component = getattr(node, "component", None)
        if kind == "pipeline" and isinstance(doc.get("component"), dict):
            _refuse_name(key, doc["component"].get("name"))
            _nodes(doc["component"].get("jobs") or {}, getattr(component, "jobs", {}) or {})


def _refuse_name(node: str, name: Any) -> None:
    """A nested pipeline is written as a component file, which azure-ai-ml loads only under
    a component's name: what ``compile`` would be refused is refused here, at ``check``."""
    if name is None or COMPONENT_NAME.match(str(name)):
        return
    fixed = re.sub(r"[^a-z0-9_]", "_", str(name).lower())
    fixed = fixed if fixed[:1].isalpha() else f"p_{fixed}"
    raise LoadError(f"node {node!r} is a nested pipeline named {name!r}, a name azure-ai-ml "
                    f"refuses for a component (lowercase letters, digits and underscores, "
                    f"starting with a letter): compile would write a component file that "
                    f"azure-ai-ml cannot load",
                    hint=f"name it {fixed!r}: @dsl.pipeline(name={fixed!r})")


def _outputs(written: dict[str, Any], objects: Any) -> None:
    """An output azure-ai-ml writes in its REST form (an AutoML node's
    ``{value: ${{parent.outputs.x}}, type: literal}``), in the YAML form, with the type the
    node declares for it (``Output(type="mlflow_model")``)."""
    for key, value in list(written.items()):
        if not (isinstance(value, dict) and value.get("type") == "literal"):
            continue
        obj = objects.get(key) if hasattr(objects, "get") else None
        declared = getattr(obj, "type", None) or getattr(getattr(obj, "_meta", None), "type",
                                                         None)
        bound = value.get("value")
        written[key] = ({"type": str(declared), "path": bound} if declared and bound
                        else {"type": str(declared)} if declared else bound)


#: The fields holding a local path of this machine (besides a data input's or output's ``path``).
_PATH_FIELDS = ("code", "conda_file")


def relative_local_paths(doc: Any, folder: Path, key: str = "") -> None:
    """Every absolute local path of ``doc`` (a ``code`` folder, a conda file, a data path;
    azure-ai-ml makes them absolute) made relative to ``folder``, where ``doc`` is written: so
    ``compile`` writes paths relative to its output folder, which another machine can submit.
    A data transfer's ``source``/``sink`` path is its connection's, not a file's: left."""
    if isinstance(doc, dict):
        for field, value in doc.items():
            if field in ("source", "sink"):
                continue
            if isinstance(value, str) and (field in _PATH_FIELDS or (
                    field == "path" and key in ("inputs", "outputs", "value"))):
                if os.path.isabs(value) and "${{" not in value and \
                        not value.startswith("/subscriptions/"):  # an ARM id is no path
                    doc[field] = Path(os.path.relpath(value, folder)).as_posix() + (
                        "/" if value.endswith("/") else "")
            else:
                relative_local_paths(value, folder, "value" if key in ("inputs", "outputs")
                                     else field)
    elif isinstance(doc, list):
        for value in doc:
            relative_local_paths(value, folder, key)


def absolute_local_paths(doc: Any, base: Path) -> None:
    """A local data path, made absolute: azure-ai-ml writes one as ``azureml:./data``
    (relative to the folder the function was called from). A cloud URI azure-ai-ml wrote as
    ``azureml:wasbs://...`` is the URI; an asset reference is left as it is."""
    if isinstance(doc, dict):
        for key, value in doc.items():
            if key == "path" and isinstance(value, str) and value.startswith("azureml:") \
                    and not value.startswith("azureml://"):
                rest = value[len("azureml:"):]
                if _URI.match(rest):
                    doc[key] = rest
                elif not _ASSET.match(rest) and not rest.startswith("/subscriptions/"):
                    doc[key] = os.path.normpath(base / rest)
            else:
                absolute_local_paths(value, base)
    elif isinstance(doc, list):
        for value in doc:
            absolute_local_paths(value, base)


__all__ = ["CARRIED", "REFUSED_COMPONENTS", "absolute_local_paths", "plain",
           "relative_local_paths", "submitted_document"]
