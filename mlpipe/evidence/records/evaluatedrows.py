"""Which rows an evaluation used, as far as the run shows without the body's help: the count of
examples its report (or a metric) says it evaluated on, against the rows per split the step
runtime counted in each table input that declares its split (``runtime.splitrows``). More
examples than the named split and every other non-training split hold together means some of
them were training rows (MP702). Pure: judges the values it is given, reads nothing.
"""
from __future__ import annotations

import re
from typing import Any

from mlpipe.evidence.records.populations import population_name

#: Split names that are training rows.
TRAINING = {"train", "training", "trn", "fit"}
_COUNT = re.compile(r"(\d+)\s+(?:examples?|rows?|samples?|images?|records?)\b", re.I)


def _counted(population: Any) -> tuple[str, int] | None:
    """(split, examples) a population states: ``{"split": "test", "examples": 16}`` or
    ``"test, 16 examples"``; None when it does not say both."""
    name = population_name(population)
    count: Any = None
    if isinstance(population, dict):
        count = population.get("examples")
    elif isinstance(population, str):
        m = _COUNT.search(population)
        count = int(m.group(1)) if m else None
    if name is None or not isinstance(count, int) or isinstance(count, bool):
        return None
    return name, count


def _shown(rows: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(rows.items()))


def training_rows_evaluated(step: str, checked: dict[str, Any] | None,
                            populations: list[Any]) -> list[tuple[str, str]]:
    """(message, hint) for each evaluated population that held more examples than the rows
    of its split and of every other non-training split of a table the step read.

    Args:
        step: the evaluation step's name.
        checked: its record's input checks (port -> entry with ``splits``), or None.
        populations: the populations its report and metrics state.

    Example:
        >>> training_rows_evaluated("score", {"rows": {"splits": {"by": "split",
        ...     "rows": {"test": 4, "train": 12}}}}, ["test, 16 examples"])[0][0][:40]
        "the evaluation in step 'score' reports 1"
    """
    found: list[tuple[str, str]] = []
    seen: set[tuple[str, int, str]] = set()
    for split, count in filter(None, map(_counted, populations)):
        for port, entry in sorted((checked or {}).items()):
            splits = entry.get("splits") if isinstance(entry, dict) else None
            splits = splits if isinstance(splits, dict) else {}
            given = splits.get("rows")
            rows = {str(k): v for k, v in (given if isinstance(given, dict) else {}).items()
                    if isinstance(v, int) and not isinstance(v, bool)}
            if split not in rows or (split, count, port) in seen:
                continue
            seen.add((split, count, port))
            trained = sum(v for k, v in rows.items() if k in TRAINING and k != split)
            beyond = count - rows[split] - sum(v for k, v in rows.items()
                                               if k not in TRAINING and k != split)
            if trained == 0 or beyond <= 0:
                continue
            whole = " (it read the whole table)" if count == sum(rows.values()) else ""
            by = "folders" if splits.get("by") == "folder" else \
                f"split column {splits.get('by')!r}"
            found.append((
                f"the evaluation in step {step!r} reports {count} examples of population "
                f"{split!r}, but its input {port!r} holds {rows[split]} {split!r} rows (by its "
                f"{by}: {_shown(rows)}): at least {min(beyond, trained)} of the rows it "
                f"evaluated are training rows{whole}",
                f"keep only the rows whose split is {split!r} before evaluating (filter the "
                f"table by its {by}), and report the population you evaluated"))
    return found
