"""Backends: where a compiled pipeline runs (``local``) or is sent (``azure``)."""
