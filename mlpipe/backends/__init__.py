"""Backends: where a compiled pipeline runs (``local`` here; ``azure`` on a workspace)."""
