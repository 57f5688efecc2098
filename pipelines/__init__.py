"""Pipelines of the example."""
