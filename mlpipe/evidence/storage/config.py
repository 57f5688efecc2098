"""Where the evidence store and the local backend's files live, from configuration.

Reads only the environment and config files; opens nothing. Order: ``MLPIPE_STORE_URL``;
``mlpipe.toml`` (``[store] url``) or ``pyproject.toml`` (``[tool.mlpipe] store_url``) in the
project root; else a SQLite file under ``evidence/`` of the project.
"""
from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

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


#: Where each setting is read from the project's files: mlpipe.toml keys, pyproject.toml keys.
_SETTINGS = {
    "store_url": (("store", "url"), ("tool", "mlpipe", "store_url")),
    "artifact_root": (("artifacts", "root"), ("tool", "mlpipe", "artifact_root")),
    "shared_artifacts": (("artifacts", "shared"), ("tool", "mlpipe", "shared_artifacts")),
    "signing_key": (("signing", "key"), ("tool", "mlpipe", "signing_key")),
    "trust": (("signing", "trust"), ("tool", "mlpipe", "trust")),
}


def _from_file(root: Path, setting: str = "store_url") -> str | None:
    toml_keys, pyproject_keys = _SETTINGS[setting]
    for name, keys in (("mlpipe.toml", toml_keys), ("pyproject.toml", pyproject_keys)):
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
            return _anchored(value, root) if setting == "store_url" else value
        if value is not None:
            raise UsageError(f"{path}: {'.'.join(keys)} is {value!r}, not a string",
                             hint=f"write it as {keys[-1]} = \"...\"")
    return None


def _anchored(url: str, root: Path) -> str:
    """A relative SQLite path in a project's config file is relative to the project, not to
    wherever the command runs."""
    prefix = "sqlite:///"
    if url.startswith(prefix) and not url.startswith(prefix + "/") and url != prefix + ":memory:":
        return prefix + str(root / url[len(prefix):])
    return url


_PASSWORD = re.compile(r"^(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^:/@?#]*:)(?P<password>[^@/?#]*)@")


def redact(url: str) -> str:
    """``url`` with its password replaced by ``***``, also when SQLAlchemy cannot parse it (an
    error about a malformed URL must not show the password either).

    Example:
        >>> redact("postgresql+psycopg://ana:S3CRET@db.example/mlpipe")
        'postgresql+psycopg://ana:***@db.example/mlpipe'
    """
    return _PASSWORD.sub(lambda m: m["head"] + "***@", url, count=1)


def scrub(text: str, url: str | None) -> str:
    """``text`` (an error message, possibly a driver's) without ``url``'s password in it, as
    written or percent-decoded."""
    found = _PASSWORD.match(url or "")
    if found is None or not found["password"]:
        return text
    text = text.replace(found[0], found["head"] + "***@")
    for secret in sorted({found["password"], unquote(found["password"])}, key=len,
                         reverse=True):
        if len(secret) >= 3:  # shorter, it would mask unrelated text; the URL form is gone
            text = text.replace(secret, "***")
    return text


@dataclass(frozen=True, slots=True)
class StoreConfig:
    """The store URL; the local folder for logs, scratch space and stat cache; this home's
    artifact root (default ``<home>/artifacts``) and the shared artifact root, if any (a
    folder path or an Azure Blob Storage container URL, docs/teams.md)."""

    url: str
    home: Path
    artifact_root: Path | None = None
    shared_artifacts: str | None = None
    #: The key that seals (docs/signing.md): a PEM file, ``none``, or None for this home's
    #: local key, generated on first use.
    signing_key: str | None = None
    #: The trust policy ``--verify`` checks signatures against when none is given.
    trust: str | None = None

    @property
    def artifacts(self) -> Path:
        return self.artifact_root or self.home / "artifacts"

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


def locate(start: str | os.PathLike[str] | None = None) -> StoreConfig:
    """Resolve the store URL and local evidence folder for the project at ``start``.

    ``MLPIPE_HOME`` overrides the local folder (default ``<project>/evidence``);
    ``MLPIPE_ARTIFACT_ROOT`` (or ``[artifacts] root`` in mlpipe.toml) this home's artifact
    root, ``MLPIPE_SHARED_ARTIFACTS`` (or ``[artifacts] shared``) the shared one,
    ``MLPIPE_SIGNING_KEY`` (or ``[signing] key``) the key that seals and ``MLPIPE_TRUST`` (or
    ``[signing] trust``) the trust policy. Relative
    folders in a project file are relative to the project.

    Example:
        >>> locate("/tmp/proj").url
        'sqlite:////tmp/proj/evidence/store.sqlite'
    """
    root = project_root(start)
    home = Path(os.environ.get("MLPIPE_HOME") or root / "evidence").resolve()
    url = os.environ.get("MLPIPE_STORE_URL") or _from_file(root)
    if not url:
        url = f"sqlite:///{home / 'store.sqlite'}"
    own = os.environ.get("MLPIPE_ARTIFACT_ROOT") or _from_file(root, "artifact_root")
    shared = os.environ.get("MLPIPE_SHARED_ARTIFACTS") or _from_file(root, "shared_artifacts")
    if shared and "://" not in shared:
        shared = str((root / Path(shared).expanduser()).resolve())
    key, trust = (_path_in(os.environ.get(name), Path.cwd())
                  or _path_in(_from_file(root, setting), root)
                  for name, setting in (("MLPIPE_SIGNING_KEY", "signing_key"),
                                        ("MLPIPE_TRUST", "trust")))
    return StoreConfig(url, home, (root / Path(own).expanduser()).resolve() if own else None,
                    shared or None, key, trust)


def _path_in(value: str | None, root: Path) -> str | None:
    """A file setting, relative to ``root``; ``none`` and key ids (``https://``) as given."""
    if not value or value.strip().lower() == "none" or "://" in value:
        return value or None
    return str((root / Path(value).expanduser()).resolve())
