"""Where the evidence store and the local backend's files live, from configuration.

Reads only the environment and config files; opens nothing. Order: ``MLPIPE_STORE_URL``;
``mlpipe.toml`` (``[store] url``) or ``pyproject.toml`` (``[tool.mlpipe] store_url``) in the
project root; else a SQLite file under ``evidence/`` of the project.
"""
from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

from mlpipe.errors import StoreError, UsageError

_MARKERS = ("mlpipe.toml", "pyproject.toml", ".git")


def project_root(start: str | os.PathLike[str] | None = None) -> Path:
    """The nearest directory at or above ``start`` (default: cwd) holding ``mlpipe.toml``,
    ``pyproject.toml`` or ``.git``; ``start`` itself when there is none."""
    here = Path(start or os.getcwd()).resolve()
    for folder in (here, *here.parents):
        if any((folder / m).exists() for m in _MARKERS):
            return folder
    return here


def _from_file(root: Path) -> str | None:
    for name, keys in (("mlpipe.toml", ("store", "url")),
                       ("pyproject.toml", ("tool", "mlpipe", "store_url"))):
        path = root / name
        if not path.is_file():
            continue
        try:
            value: object = tomllib.loads(path.read_text())
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise UsageError(f"{path} is not valid TOML: {exc}",
                             hint="fix the file or set MLPIPE_STORE_URL") from exc
        for key in keys:
            value = value.get(key) if isinstance(value, dict) else None
        if isinstance(value, str) and value:
            return _anchored(value, root)
    return None


def _anchored(url: str, root: Path) -> str:
    """A relative SQLite path in a project's config file is relative to the project, not to
    wherever the command runs."""
    prefix = "sqlite:///"
    if url.startswith(prefix) and not url.startswith(prefix + "/") and url != prefix + ":memory:":
        return prefix + str(root / url[len(prefix):])
    return url


@dataclass(frozen=True, slots=True)
class Location:
    """The store URL and the local folder for artifacts, logs, scratch space and stat cache."""

    url: str
    home: Path

    @property
    def artifacts(self) -> Path:
        return self.home / "artifacts"

    @property
    def logs(self) -> Path:
        return self.home / "logs"

    @property
    def work(self) -> Path:
        return self.home / "work"

    @property
    def stat_cache(self) -> Path:
        return self.home / "statcache.sqlite"

    @property
    def environments(self) -> Path:
        """Where ``submit --isolate`` keeps the environments it builds, by digest."""
        return self.home / "environments"


def missing_store(path: str) -> StoreError:
    """The error of a command that only reads when there is no SQLite store at ``path``: a
    mistyped location must not look like "nothing was ever run"."""
    return StoreError(f"no evidence store at {path}: nothing has been recorded there yet",
                      hint="run a pipeline with `mlpipe submit` first, or point "
                           "MLPIPE_STORE_URL at the store you mean")


def locate(start: str | os.PathLike[str] | None = None) -> Location:
    """Resolve the store URL and local evidence folder for the project at ``start``.

    ``MLPIPE_HOME`` overrides the local folder (default ``<project>/evidence``).

    Example:
        >>> locate("/tmp/proj").url
        'sqlite:////tmp/proj/evidence/store.sqlite'
    """
    root = project_root(start)
    home = Path(os.environ.get("MLPIPE_HOME") or root / "evidence").resolve()
    url = os.environ.get("MLPIPE_STORE_URL") or _from_file(root)
    if not url:
        url = f"sqlite:///{home / 'store.sqlite'}"
    return Location(url, home)
