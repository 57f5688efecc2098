"""The evidence store: what ran, with which code, environment, data and parameters.

Importing ``mlpipe.evidence.storage.store`` (or ``Store``/``open_store`` from here) imports
SQLAlchemy; ``import mlpipe`` never does, and neither do ``storage.config`` and
``records.fastpath`` (the fast read of a sealed bundle).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from mlpipe.evidence.storage.config import StoreConfig, locate

if TYPE_CHECKING:
    from mlpipe.evidence.storage.store import Store


def open_store(start: str | None = None, *, create: bool = True) -> "Store":
    """Open the store configured for the project at ``start`` (default: the cwd).

    ``create=False`` refuses to make a SQLite store that does not exist yet (read-only use).
    The first time a project's home or SQLite store is made, the project's ``.gitignore`` gets
    an entry for them (``evidence.ignores``).
    """
    from mlpipe.evidence.storage import ignores
    from mlpipe.evidence.storage.store import Store

    location = locate(start)
    first = create and ignores.first_run(location)
    store = Store.open(location.url, create=create)
    if first:  # the first run in this project: git must not commit the store
        ignores.ensure_ignored(location, start)
    return store


def __getattr__(name: str):
    if name == "Store":
        from mlpipe.evidence.storage.store import Store
        return Store
    raise AttributeError(f"module 'mlpipe.evidence' has no attribute {name!r}")


__all__ = ["Store", "StoreConfig", "locate", "open_store"]
