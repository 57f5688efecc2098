"""Backends: where a pipeline runs (``local`` here, ``azure`` in a workspace)."""
