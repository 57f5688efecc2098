"""How paths are kept and shown: as the user wrote them, and relative to the working directory.

Locations are stored absolute, by name with links kept (``lexical``); a relative reference
moved to another folder is rebased as a user would write it (``rebased``). Only their
rendering depends on where the user stands (``display_path``).
"""
from __future__ import annotations

import functools
import os
import re
from pathlib import Path


def display_path(path: str) -> str:
    """``path`` relative to the current directory when it lies inside it, else unchanged."""
    return _display_path(path, os.getcwd())


def display_place(file: str | None, line: int | None) -> str | None:
    """``file:line`` (or just ``file``) as shown to a user; None where no file is known."""
    if file is None:
        return None
    shown = display_path(file)
    return f"{shown}:{line}" if line else shown


@functools.lru_cache(maxsize=1024)
def _display_path(path: str, cwd: str) -> str:
    if not os.path.isabs(path):
        return path
    try:
        rel = os.path.relpath(path, cwd)
    except ValueError:
        return path
    return path if rel.startswith(os.pardir + os.sep) else rel


def derived_root() -> Path:
    """This user's folder of documents mlpipe derives from the user's files (the job an
    azure-ai-ml Python pipeline builds, as YAML): ``$XDG_CACHE_HOME/mlpipe-sdk``, else
    ``~/.cache/mlpipe-sdk``. What is under it is no code of the user's: a run records the
    files it was derived from, never it."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "mlpipe-sdk"


def lexical(path: str | os.PathLike[str]) -> Path:
    """``path`` made absolute with ``..`` folded by name, links kept: the place as the user
    wrote it. ``Path.resolve()`` follows links, so a relative reference rebased from a resolved
    file would come back through the link's target (a project behind a symlink).

    Example:
        >>> lexical("/proj/link/../data").as_posix()
        '/proj/data'
    """
    return Path(os.path.normpath(os.path.abspath(path)))


def rebased(target: str | os.PathLike[str], here: str | os.PathLike[str]) -> str:
    """The relative path from the folder ``here`` to ``target``, as a user would write it.

    By name (``lexical``) when both sides are spelled through the same links; when only one
    is (a job read through a link, written to a folder named by its target, or the other way
    round), the path by the links' targets can be the one the user wrote: of the two that name
    the same place, the one that climbs less, by name on a tie.

    Example:
        >>> rebased("/proj/data", "/proj/out")
        '../data'
    """
    by_name = os.path.relpath(lexical(target), lexical(here))
    try:
        by_target = os.path.relpath(os.path.realpath(target), os.path.realpath(here))
    except ValueError:  # another drive (Windows): no relative path by the targets
        return by_name
    if by_target == by_name:
        return by_name
    place = os.path.realpath(target)
    found = [rel for rel in (by_name, by_target)
             if os.path.realpath(os.path.join(here, rel)) == place] or [by_name]
    return min(found, key=lambda rel: Path(rel).parts.count(os.pardir))


_SCHEME = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]+):")
_STORAGE = {"wasb", "wasbs", "abfs", "abfss", "adl", "s3", "s3a", "gs", "hdfs"}


def cloud_reference(text: object) -> str | None:
    """What kind of cloud reference a data path is (``"a web URL"``), or None for a local path.

    Azure ML reads ``azureml:NAME:VERSION`` / ``azureml:NAME@latest`` (a data asset),
    ``azureml://datastores/...`` (a datastore path), ``azureml://registries/...`` (a registry
    asset), other ``azureml:`` references (asset URIs and ARM ids), ``http(s)://`` (a web URL)
    and storage URLs (``wasbs://``, ``abfss://``, ``adl://``, ...). None of them is a file on
    this machine. A one-letter prefix (a Windows drive) is a local path.

    Example:
        >>> cloud_reference("azureml://datastores/blob/paths/x"), cloud_reference("./data")
        ('an Azure ML datastore path', None)
    """
    if not isinstance(text, str):
        return None
    m = _SCHEME.match(text.strip())
    if m is None:
        return None
    scheme = m["scheme"].lower()
    rest = text.strip()[len(m.group(0)):]
    if scheme == "azureml":
        if rest.startswith("//datastores/"):
            return "an Azure ML datastore path"
        if rest.startswith("//registries/"):
            return "an asset in an Azure ML registry"
        if rest.startswith(("//", "/subscriptions/")):
            return "an Azure ML asset"
        return "an Azure ML data asset"
    if scheme in ("http", "https"):
        return "a web URL"
    if scheme in _STORAGE:
        return f"a cloud storage URL ({scheme}://)"
    if scheme.startswith("git"):
        return "a git reference"
    return f"a remote reference ({scheme}:)"
