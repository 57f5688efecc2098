"""What split a metric's population names (``"test, 90 examples"`` -> ``"test"``): the one
reading the findings, the policy's criteria and the read commands' tables share."""
from __future__ import annotations

import re
from typing import Any


def population_name(population: Any) -> str | None:
    """The split a population names: ``"train, 210 examples"`` -> ``"train"``,
    ``{"split": "test", "examples": 90}`` -> ``"test"``.

    Example:
        >>> population_name("Test split, 90 examples")
        'test'
    """
    if isinstance(population, dict):
        population = population.get("split") or population.get("name")
    if not isinstance(population, str) or not population.strip():
        return None
    head = population.split(",", 1)[0].strip().lower()
    head = re.sub(r"^split\s+|\s+split$", "", head)
    return head or None
