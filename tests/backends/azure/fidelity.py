"""Field-by-field comparison of two pipeline jobs as azure-ai-ml loads them: the original YAML
and mlpipe's export of it.

Both are compared whole, twice: as ``_to_dict()`` (what azure-ai-ml read, components inlined)
and as the REST body ``_to_rest_object().as_dict()`` (what would be sent to Azure ML). Every
key of both is compared; two differences are tolerated, and only these:

- a local path field (an input's or output's ``path``/``uri``, ``code``, ``conda_file``,
  ``additional_includes``)
  is compared by the place it names, resolved against the folder of the file that holds it
  (the export lives in another folder, so its relative paths must differ to name the same
  place, and the same text there would name another);
- tags under ``mlpipe.`` (mlpipe's own: the pipeline digest, the run id), which the export
  adds.
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from mlpipe.paths import cloud_reference

_ASSET = re.compile(r"^[A-Za-z0-9_][\w.-]*(:[\w.-]+|@[\w.-]+)$")
PATH_KEYS = {"code", "codeId", "conda_file", "additional_includes"}
#: a data path: the ``path``/``uri`` of an input or output (a data transfer's ``source.path``
#: is relative to its connection, not to a file, and is compared as text)
_DATA_PATH = re.compile(r"\.(inputs|outputs)\.[^.]+\.(path|uri)$|"
                        r"\.(training_data|validation_data|test_data)\.(path|uri)$|"
                        r"\.build\.path$")


def _bases(job: Any) -> dict[str, Path]:
    """Dict path of each loaded component -> the folder its relative paths are relative to."""
    found = {"": Path(job.base_path)}
    trial = getattr(job, "trial", None)  # a standalone sweep's trial, from its own folder
    if trial is not None and not isinstance(trial, str) and getattr(trial, "base_path", None):
        found[".trial"] = Path(trial.base_path)

    def walk(entity: Any, prefix: str) -> None:
        for name, node in (getattr(entity, "jobs", None) or {}).items():
            # a parallel node that takes its task from its component: azure-ai-ml bases the
            # task's code on the component's folder (Parallel.__init__ sets the node's
            # _base_path to component.base_path), not on the pipeline's
            node_base = getattr(node, "_base_path", None)
            if getattr(node, "task", None) is not None and node_base:
                found[f"{prefix}.jobs.{name}.task"] = Path(node_base)
            for attr in ("component", "trial"):
                comp = getattr(node, attr, None)
                base = getattr(comp, "base_path", None)
                if comp is not None and not isinstance(comp, str) and base:
                    key = f"{prefix}.jobs.{name}.{attr}"
                    found[key] = Path(base)
                    walk(comp, key)

    walk(job, "")
    return found


def _base(bases: dict[str, Path], where: str) -> Path:
    best = max((k for k in bases if where.startswith(k)), key=len)
    return bases[best]


def _resolve(value: Any, base: Path) -> str | None:
    if not isinstance(value, str):
        return None
    rest = value.removeprefix("azureml:")
    if _ASSET.match(rest):
        return None  # azureml:NAME:VERSION or azureml:NAME@label: an asset, not a path
    # azure-ai-ml writes a local path as "azureml:<path>" in _to_dict()
    text = rest if cloud_reference(rest) is None else value
    if cloud_reference(text) is not None or "${{" in text:
        return None
    return os.path.normpath(os.path.abspath(base / text)).rstrip("/")


def _made_absolute(*values: Any) -> bool:
    """Whether azure-ai-ml gave one side as an absolute path: it resolves some (a parallel
    task's ``code`` read through a component file) with ``Path.resolve()``, links followed, so
    that side names the place by its target and only the places can be compared. A path both
    sides give relative is compared as written: a link on the way must not change it."""
    return any(isinstance(v, str) and os.path.isabs(v.removeprefix("azureml:")) for v in values)


def _without_mlpipe_tags(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: v for k, v in value.items() if not str(k).startswith("mlpipe.")} or None
    return value


def _differences(a: Any, b: Any, where: str, key: str, bases: tuple[dict[str, Path],
                 dict[str, Path]]) -> list[str]:
    if key == "tags":
        a, b = _without_mlpipe_tags(a), _without_mlpipe_tags(b)
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b), key=str):
            out.extend(_differences(a.get(k), b.get(k), f"{where}.{k}", str(k), bases))
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        out = []
        for i, (x, y) in enumerate(zip(a, b)):
            out.extend(_differences(x, y, f"{where}[{i}]", key, bases))
        return out
    if key in PATH_KEYS or _DATA_PATH.search(where):
        # a local path names a place relative to its own file: compare the places, always
        # (the same text in another folder is another place)
        ra = _resolve(a, _base(bases[0], where))
        rb = _resolve(b, _base(bases[1], where))
        if ra is not None or rb is not None:
            same = ra == rb or (_made_absolute(a, b) and ra is not None and rb is not None
                                and os.path.realpath(ra) == os.path.realpath(rb))
            return [] if same else [f"{where}: {a!r} ({ra}) != {b!r} ({rb})"]
    if _equal(a, b):
        return []
    if _is_entity(a) and type(a) is type(b):
        return []  # a component not yet registered: compared in the _to_dict() form
    return [f"{where}: {a!r} != {b!r}"]


def _equal(a: Any, b: Any) -> bool:
    try:
        same = a == b
    except Exception:  # an azure-ai-ml pipeline expression: its == builds an expression
        same = None
    return same if isinstance(same, bool) else str(a) == str(b)


def _is_entity(value: Any) -> bool:
    return hasattr(value, "_to_dict") and not isinstance(value, (dict, list, str))


def _rest(job: Any) -> Any:
    body = job._to_rest_object()
    return body.as_dict() if hasattr(body, "as_dict") else body  # a single job: already a dict


def field_differences(original: Any, exported: Any) -> list[str]:
    """Every field in which two loaded jobs differ, as ``where: a != b`` lines (none: equal).

    Example:
        >>> field_differences(load_job("pipeline.yml"), load_job("build/pipeline.yml"))
        []
    """
    bases = (_bases(original), _bases(exported))
    found = _differences(original._to_dict(), exported._to_dict(), "", "", bases)
    rest = _differences(_rest(original), _rest(exported), "rest", "",
                        ({"rest": bases[0][""]}, {"rest": bases[1][""]}))
    return found + rest
