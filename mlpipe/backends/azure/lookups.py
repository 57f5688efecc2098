"""The pre-flight's questions to the workspace, each one azure-ai-ml ``MLClient`` call.

An answer is the entity, ``None`` for "not found", ``Unchecked`` where a question about the
region (its VM sizes, the quota) went unanswered (unknown is not absent: a 404 there says nothing
of the size), or the ``AzureError`` line of any other failure (kept, not raised, so the other
lookups in flight finish; the caller raises the first).
Counts the requests it makes, and knows nothing of diagnostics.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from mlpipe.backends.azure.workspace import Workspace
from mlpipe.errors import AzureError

#: Questions whose failure leaves a fact unknown rather than the whole pre-flight impossible.
REGIONAL = ("sizes", "usages")


@dataclass(frozen=True, slots=True)
class Unchecked:
    """A question the workspace did not answer, and why (one line)."""

    reason: str


class Lookups:
    """Lookups through ``client`` for ``workspace``; ``requests`` counts the HTTP requests
    made (a label costs what azure-ai-ml sends for it: one versions-list request for an
    environment, component or model; two for a data asset, its container then the version)."""

    def __init__(self, client: Any, workspace: Workspace) -> None:
        self.client, self.workspace = client, workspace
        self.requests = 0
        self._lock = threading.Lock()
        self._location: str | None = None

    def _count(self, n: int = 1) -> None:
        with self._lock:
            self.requests += n

    def get(self, kind: str, key: Any) -> Any:
        """The answer to one question: ``compute`` NAME, ``environment``/``component``/
        ``data``/``model`` (NAME, VERSION, LABEL), ``sizes`` or ``usages`` (the region's), or the
        ``workspace`` (its region; a missing workspace is an ``AzureError``)."""
        from azure.core.exceptions import ResourceNotFoundError

        from mlpipe.backends.azure.service import azure_failure, refusal

        try:
            return getattr(self, f"_{kind}")(key)
        except ResourceNotFoundError as exc:
            if kind in REGIONAL:
                return Unchecked(refusal(exc))
            if kind == "workspace":  # "no workspace", never "no compute"
                return azure_failure(exc, self.workspace, "read the workspace")
            return None
        except AzureError as err:
            return Unchecked(err.message) if kind in REGIONAL else err
        except Exception as exc:
            if _not_found(exc) and kind != "workspace" and kind not in REGIONAL:
                return None
            err = azure_failure(exc, self.workspace, f"look up the {kind} the job names")
            return Unchecked(err.message) if kind in REGIONAL else err

    def _workspace(self, _: Any) -> str:
        """The workspace itself (asked first: a missing one is one line, and its region is
        where VM sizes and quota are asked)."""
        return self.location()

    def _compute(self, name: str) -> Any:
        self._count()
        return self.client.compute.get(name)

    def _asset(self, operations: Any, key: tuple[str, str | None, str | None],
               label_requests: int = 1) -> Any:
        name, version, label = key
        self._count(1 if version else label_requests)
        if version:
            return operations.get(name, version=version)
        return operations.get(name, label=label)

    def _environment(self, key):
        return self._asset(self.client.environments, key)

    def _component(self, key):
        return self._asset(self.client.components, key)

    def _data(self, key):
        return self._asset(self.client.data, key, label_requests=2)

    def _model(self, key):
        return self._asset(self.client.models, key)

    def location(self) -> str:
        with self._lock:
            if self._location is None:
                self.requests += 1
                ws = self.client.workspaces.get(self.workspace.workspace_name)
                self._location = str(ws.location)
            return self._location

    def _sizes(self, _: Any) -> list[Any]:
        location = self.location()
        self._count()
        return list(self.client.compute.list_sizes(location=location))

    def _usages(self, _: Any) -> list[Any]:
        location = self.location()
        self._count()
        return list(self.client.compute.list_usage(location=location))


def _not_found(exc: BaseException) -> bool:
    """azure-ai-ml's own "does not exist" (a label on a name with no versions)."""
    text = str(getattr(exc, "message", None) or exc)
    return type(exc).__name__ == "ValidationException" and (
        "does not exist" in text or "not found" in text.lower())


def field_of(entity: Any, *names: str) -> Any:
    """A field of an azure-ai-ml entity under any of its names: ``VmSize`` and ``Usage`` keep
    their REST body's keys (``vCPUs``, ``currentValue``) as attributes."""
    for name in names:
        value = getattr(entity, name, None)
        if value is None:
            value = getattr(entity, "__dict__", {}).get(name)
        if value is not None:
            return value
    return None


__all__ = ["REGIONAL", "Lookups", "Unchecked", "field_of"]
