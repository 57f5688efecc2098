"""The evidence store: what ran, with which code, environment, data and parameters.

Importing this package imports SQLAlchemy; ``import mlpipe`` never does.
"""
from mlpipe.evidence.config import Location, locate
from mlpipe.evidence.store import Store


def open_store(start: str | None = None) -> Store:
    """Open the store configured for the project at ``start`` (default: the cwd)."""
    return Store.open(locate(start).url)


__all__ = ["Location", "Store", "locate", "open_store"]
