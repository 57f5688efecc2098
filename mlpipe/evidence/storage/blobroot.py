"""An Azure Blob Storage container as the shared artifact root (``mlpipe.evidence.storage.roots``).

An artifact under key ``K`` is its file at ``PREFIX/K`` or its folder's files under
``PREFIX/K/...``, and ``PREFIX/<entry of K>/.mlpipe-artifact.json`` written LAST says what is
there (its name, its files, its empty folders): an artifact whose upload was cut short has no
such record and is not there. Whatever is fetched is re-hashed by ``ArtifactRoots.resolve``
before it is used, so a damaged blob is never used either. ``azure-storage-blob`` is imported
only when a container is named (the optional extra ``mlpipe-aml[azure-blob]``).
"""
from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from mlpipe.errors import UsageError

RECORD = ".mlpipe-artifact.json"
CONNECTION_ENV = "AZURE_STORAGE_CONNECTION_STRING"
#: A container that does not answer costs a run seconds, not minutes: few retries, short
#: connection timeouts (the run then re-runs what it could not fetch).
_CLIENT = {"retry_total": 2, "initial_backoff": 1, "increment_base": 2, "connection_timeout": 10}


def _client_module() -> Any:
    try:
        import azure.storage.blob as blob
    except ImportError:
        raise UsageError("an Azure Blob Storage container as the shared artifact root needs "
                         "the azure-storage-blob package",
                         hint="pip install 'mlpipe-aml[azure-blob]'") from None
    return blob


class BlobRoot:
    """A container (and a folder prefix in it) every home reaches.

    Args:
        container: a ``ContainerClient`` of azure-storage-blob.
        prefix: the folder in the container the artifacts live under ("" for the top).
        name: how the root is named to users (its URL, without credentials).
    """

    def __init__(self, container: Any, prefix: str, name: str) -> None:
        self.container = container
        self.prefix = prefix.strip("/") + "/" if prefix.strip("/") else ""
        self._name = name

    @property
    def name(self) -> str:
        return self._name

    @classmethod
    def from_url(cls, spec: str) -> BlobRoot:
        """The root ``spec`` names.

        ``azure-blob://CONTAINER[/PREFIX]``: the account and its key from
        ``AZURE_STORAGE_CONNECTION_STRING``. ``https://ACCOUNT.blob.core.windows.net/CONTAINER
        [/PREFIX]``: the connection string when it is set, else ``DefaultAzureCredential``
        (``az login``, a managed identity; needs azure-identity).

        Raises:
            UsageError: a URL of another form, no connection string where one is needed, or
                azure-storage-blob is not installed.
        """
        parts = urlsplit(spec)
        scheme = parts.scheme.lower()
        if scheme == "azure-blob":
            container, prefix = parts.netloc, parts.path
            connection = os.environ.get(CONNECTION_ENV)
            if not connection:
                raise UsageError(f"the shared artifact root {spec} names a container but "
                                 f"{CONNECTION_ENV} is not set",
                                 hint=f"set {CONNECTION_ENV} to the storage account's "
                                      f"connection string, or name the container by its "
                                      f"https://ACCOUNT.blob.core.windows.net/CONTAINER URL")
            service = _client_module().BlobServiceClient.from_connection_string(connection,
                                                                                **_CLIENT)
        elif scheme in ("https", "http") and parts.netloc:
            container, _, prefix = parts.path.lstrip("/").partition("/")
            account_url = f"{parts.scheme}://{parts.netloc}"
            connection = os.environ.get(CONNECTION_ENV)
            blob = _client_module()
            if connection:
                service = blob.BlobServiceClient.from_connection_string(connection, **_CLIENT)
            elif parts.query:  # a SAS token in the URL
                service = blob.BlobServiceClient(f"{account_url}?{parts.query}", **_CLIENT)
            else:
                try:
                    from azure.identity import DefaultAzureCredential
                except ImportError:
                    raise UsageError(f"the shared artifact root {account_url}/{container} needs "
                                     f"a credential: {CONNECTION_ENV}, a SAS token in the URL, "
                                     f"or azure-identity for DefaultAzureCredential",
                                     hint="pip install azure-identity, or set "
                                          f"{CONNECTION_ENV}") from None
                service = blob.BlobServiceClient(account_url, credential=DefaultAzureCredential(),
                                                 **_CLIENT)
        else:
            raise UsageError(f"the shared artifact root {spec!r} is neither a folder nor an "
                             f"Azure Blob Storage container URL",
                             hint="give a folder path, azure-blob://CONTAINER[/PREFIX] or "
                                  "https://ACCOUNT.blob.core.windows.net/CONTAINER[/PREFIX]")
        if not container:
            raise UsageError(f"the shared artifact root {spec!r} names no container",
                             hint="write it as azure-blob://CONTAINER[/PREFIX]")
        name = f"{parts.scheme}://{parts.netloc}{parts.path}"
        return cls(service.get_container_client(container), prefix, name)

    # --- SharedRoot -----------------------------------------------------------------------

    def _record_name(self, key: str) -> str:
        return f"{self.prefix}{key.rsplit('/', 1)[0]}/{RECORD}"

    def _record(self, key: str) -> dict[str, Any] | None:
        from azure.core.exceptions import AzureError, ResourceNotFoundError

        try:
            data = self.container.download_blob(self._record_name(key)).readall()
        except ResourceNotFoundError:
            return None
        except AzureError as exc:
            raise OSError(f"{self.name}: {exc}") from exc
        try:
            record = json.loads(data)
        except ValueError:
            return None
        if not isinstance(record, dict) or record.get("name") != key.rsplit("/", 1)[1]:
            return None
        return record

    def has(self, key: str) -> bool:
        return self._record(key) is not None

    def fetch(self, key: str, into: Path) -> bool:
        from azure.core.exceptions import AzureError

        record = self._record(key)
        if record is None:
            return False
        files = [f for f in record.get("files", []) if isinstance(f, str)]
        try:
            if record.get("kind") == "file":
                self._download(f"{self.prefix}{key}", into)
                return True
            into.mkdir()
            for folder in record.get("folders", []):
                _inside(into, folder).mkdir(parents=True, exist_ok=True)
            for rel in files:
                self._download(f"{self.prefix}{key}/{rel}", _inside(into, rel))
        except AzureError as exc:
            raise OSError(f"{self.name}: {exc}") from exc
        return True

    def _download(self, blob_name: str, target: Path) -> None:
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target, "wb") as fh:
            self.container.download_blob(blob_name).readinto(fh)

    def publish(self, key: str, path: Path) -> None:
        if self.has(key):
            return
        # the key's name, which is the file's or folder's own name for an output, and "input"
        # for an input snapshot read in place under any name (evidence.roots.input_key)
        entry_name = key.rsplit("/", 1)[-1]
        if path.is_dir():
            files, folders = [], []
            for here, dirs, names in os.walk(path):
                rel_here = Path(here).relative_to(path).as_posix()
                base = "" if rel_here == "." else rel_here + "/"
                if not dirs and not names and base:
                    folders.append(base.rstrip("/"))
                for name in sorted(names):
                    full = Path(here) / name
                    if full.is_symlink():
                        continue  # links are not content; a step's outputs hold none
                    files.append(base + name)
            for rel in sorted(files):
                self._upload(f"{self.prefix}{key}/{rel}", path / rel)
            record = {"name": entry_name, "kind": "folder", "files": sorted(files),
                      "folders": sorted(folders)}
        else:
            self._upload(f"{self.prefix}{key}", path)
            record = {"name": entry_name, "kind": "file", "files": [entry_name],
                      "folders": []}
        self.container.upload_blob(self._record_name(key), json.dumps(record, sort_keys=True),
                                   overwrite=True)

    def _upload(self, blob_name: str, source: Path) -> None:
        with open(source, "rb") as fh:
            self.container.upload_blob(blob_name, fh, overwrite=True)

    def keys(self) -> Iterator[str]:
        for blob in self.container.list_blobs(name_starts_with=self.prefix or None):
            if blob.name.endswith("/" + RECORD):
                entry = blob.name[len(self.prefix):-len(RECORD) - 1]
                try:
                    record = json.loads(self.container.download_blob(blob.name).readall())
                except ValueError:
                    continue
                if isinstance(record, dict) and isinstance(record.get("name"), str):
                    yield f"{entry}/{record['name']}"


def _inside(root: Path, rel: str) -> Path:
    """``root/rel``, refusing a name that would leave ``root`` (a hostile record)."""
    target = (root / rel).resolve()
    if not target.is_relative_to(root.resolve()):
        raise OSError(f"a shared artifact names {rel!r}, outside its folder")
    return target


__all__ = ["CONNECTION_ENV", "BlobRoot"]
