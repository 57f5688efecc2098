"""Compare what mlpipe wrote with what azure-ai-ml loads from it, as one normal form.

azure-ai-ml inlines referenced components (renaming them ``azureml_anonymous``), turns
binding strings into ``{path: ...}``, copies ``resources``/``distribution`` from a component
onto its node, names an inline environment ``CliV2AnonymousEnvironment`` and writes scalars
as strings; the normal form undoes exactly those.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml


def _scalar(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _scalar(v) for k, v in value.items() if k != "$schema"}
    if isinstance(value, list):
        return [_scalar(v) for v in value]
    return None if value is None else str(value)


def _component(doc: dict[str, Any], anonymous: bool) -> dict[str, Any]:
    doc = dict(doc)
    if anonymous:
        doc.pop("name", None)
        doc.pop("version", None)
    _drop_zero_parameter_servers(doc)
    env = doc.get("environment")
    if isinstance(env, dict) and env.get("name") == "CliV2AnonymousEnvironment":
        doc["environment"] = {k: v for k, v in env.items() if k not in ("name", "version")}
    if "jobs" in doc:
        doc["jobs"] = {k: _node(v) for k, v in doc["jobs"].items()}
    return doc


def _drop_zero_parameter_servers(doc: dict[str, Any]) -> None:
    dist = doc.get("distribution")
    if isinstance(dist, dict) and dist.get("parameter_server_count") in ("0", None):
        doc["distribution"] = {k: v for k, v in dist.items() if k != "parameter_server_count"}


def _node(node: dict[str, Any]) -> dict[str, Any]:
    node = dict(node)
    _drop_zero_parameter_servers(node)
    component = _component(node["component"], anonymous=True)
    node["component"] = component
    node["inputs"] = {k: v["path"] if isinstance(v, dict) and set(v) == {"path"} else v
                      for k, v in (node.get("inputs") or {}).items()}
    if not node["inputs"]:
        del node["inputs"]
    for key in ("resources", "distribution"):
        if key in node and node[key] == component.get(key):
            del node[key]
    return node


def normal_form(doc: dict[str, Any]) -> dict[str, Any]:
    """The normal form of a pipeline job dict whose components are inlined."""
    return _component(_scalar(doc), anonymous=False)


def _literal_inputs(entity: Any, doc: dict[str, Any]) -> None:
    # _to_dict() writes a boolean job input as 0/1; the loaded entity holds the bool itself.
    for name, node in (doc.get("jobs") or {}).items():
        loaded = entity.jobs[name]
        for key, value in (node.get("inputs") or {}).items():
            data = getattr(loaded.inputs[key], "_data", None)
            if isinstance(data, bool) and value in (0, 1):
                node["inputs"][key] = data
        if isinstance(node.get("component"), dict) and hasattr(loaded.component, "jobs"):
            _literal_inputs(loaded.component, node["component"])


def loaded_form(job: Any) -> dict[str, Any]:
    """Normal form of a ``PipelineJob`` (or component) azure-ai-ml loaded."""
    doc = job._to_dict()
    if hasattr(job, "jobs"):
        _literal_inputs(job, doc)
        for key, value in (doc.get("inputs") or {}).items():
            data = getattr(job.inputs[key], "_data", None)
            if isinstance(data, bool) and value in (0, 1):
                doc["inputs"][key] = data
    return normal_form(doc)


def _inline(doc: dict[str, Any], here: Path) -> dict[str, Any]:
    doc = dict(doc)
    if isinstance(doc.get("code"), str) and ":" not in doc["code"]:
        doc["code"] = os.path.normpath(here.parent / doc["code"])
    for node in (doc.get("jobs") or {}).values():
        ref = node.get("component")
        if isinstance(ref, str) and not ref.startswith("azureml:"):
            path = (here.parent / ref).resolve()
            node["component"] = _inline(yaml.safe_load(path.read_text()), path)
    return doc


def written_form(path: Path) -> dict[str, Any]:
    """Normal form of the YAML file mlpipe wrote at ``path``, components inlined."""
    path = Path(path).resolve()
    return normal_form(_inline(yaml.safe_load(path.read_text()), path))


def differences(a: Any, b: Any, path: str = "") -> list[str]:
    """Where two normal forms differ, as ``path: a != b`` lines (empty when equal)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for key in sorted(set(a) | set(b), key=str):
            out.extend(differences(a.get(key), b.get(key), f"{path}.{key}"))
        return out
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]


def _text(value: Any) -> Any:
    data = getattr(value, "_data", value)
    if hasattr(data, "_to_dict"):
        data = data._to_dict()
    if hasattr(data, "path") and not isinstance(data, (str, dict)):
        data = {"type": getattr(data, "type", None), "path": data.path}
    return _scalar(data)


def leaf_jobs(job: Any, default_compute: str | None = None, prefix: str = "") -> dict[str, Any]:
    """What each leaf command job of a loaded pipeline runs, however the YAML spelled it
    (inline command or component reference, nested pipelines flattened)."""
    default_compute = default_compute or getattr(getattr(job, "settings", None),
                                                 "default_compute", None)
    out: dict[str, Any] = {}
    for name, node in job.jobs.items():
        if node.type == "pipeline":
            out.update(leaf_jobs(node.component, default_compute, f"{prefix}{name}."))
            continue
        comp = node.component
        resources = node.resources or comp.resources
        dist = node.distribution or comp.distribution
        out[prefix + name] = _scalar({
            "command": " ".join(comp.command.split()),
            "environment": comp.environment if isinstance(comp.environment, str)
            else comp.environment.image,
            "code": comp.code if comp.code is None or ":" in comp.code
            else os.path.abspath(os.path.join(comp.base_path, comp.code)),
            "compute": (node.compute or default_compute or "").removeprefix("azureml:"),
            "instance_count": getattr(resources, "instance_count", None) or 1,
            "distribution": None if dist is None else {
                k: v for k, v in vars(dist).items() if v not in (None, 0)},
            "inputs": {k: _text(v) for k, v in node.inputs.items()
                       if getattr(v, "_data", None) is not None},
            "outputs": {k: _text(v) for k, v in node.outputs.items()
                        if isinstance(getattr(v, "_data", None), str)},
            "input_types": {k: v.type for k, v in comp.inputs.items()},
            "output_types": {k: v.type for k, v in comp.outputs.items()},
        })
    return out
