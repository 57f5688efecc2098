"""Split manifest contracts: example id -> split name, required splits, disjointness.

A manifest is a CSV file with an id column and a split column (``id,split`` by default).
Validation streams it with the standard library. Knows nothing of specs.
"""
from __future__ import annotations

import csv
import gc
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from operator import itemgetter
from pathlib import Path
from typing import Any

from mlpipe.artifacts import AssetType
from mlpipe.contracts.base import Contract, Difference, Reading, check_exists, excerpt
from mlpipe.errors import ContractError, DefinitionError


@dataclass(frozen=True, eq=True)
class SplitManifest(Contract):
    """Which split (train, val, test, ...) each example belongs to.

    Args:
        name: the manifest's name; versions are compared between manifests of the same name.
        splits: the split names that may appear; None allows any.
        required: the splits that must have at least one example.
        disjoint: the promise (producer) or requirement (consumer) that no example id is in
            two splits.
        id_column: the header of the id column.
        split_column: the header of the split column.
        version: ``MAJOR`` or ``MAJOR.MINOR``.

    Example:
        >>> SplitManifest("defect-split", splits=["train", "val", "test"],
        ...               required=["train", "test"])
    """

    kind = "split-manifest"
    transport = AssetType.URI_FILE
    holds_examples = False

    name: str | None = None
    splits: Sequence[str] | None = None
    required: Sequence[str] = ()
    disjoint: bool = True
    id_column: str = "id"
    split_column: str = "split"
    version: str = "1"

    def __post_init__(self) -> None:
        super().__post_init__()
        if isinstance(self.splits, str) or isinstance(self.required, str):
            raise DefinitionError(f"SplitManifest {self.name!r}: splits and required are lists "
                                  f"of split names", hint='write required=["train", "test"]')
        object.__setattr__(self, "required", tuple(self.required))
        if self.splits is not None:
            object.__setattr__(self, "splits", tuple(self.splits))
            extra = [s for s in self.required if s not in self.splits]
            if extra:
                raise DefinitionError(f"SplitManifest {self.name!r} requires split {extra[0]!r} "
                                      f"but allows only {', '.join(self.splits)}",
                                      hint="add it to splits=[...]")

    def differences(self, required: Contract) -> Iterator[Difference]:
        assert isinstance(required, SplitManifest)
        if required.disjoint and not self.disjoint:
            yield Difference(f"the consumer requires disjoint splits but {self.label} does not "
                             f"promise that (disjoint=False)",
                             "make the producer assign each id to one split and declare "
                             "disjoint=True", "split-disjointness-not-promised")
        for split in required.required:
            if split not in self.required:
                promised = ", ".join(self.required) or "none"
                yield Difference(f"the consumer requires split {split!r} but {self.label} "
                                 f"guarantees only {promised}",
                                 f"add {split!r} to the producer's required=[...]",
                                 "split-missing")
        if required.splits is not None:
            if self.splits is None:
                yield Difference(f"the consumer accepts only the splits "
                                 f"{', '.join(required.splits)} but {self.label} allows any",
                                 "declare splits=[...] on the producer")
            else:
                for split in self.splits:
                    if split not in required.splits:
                        # The consumer's accepted splits are a safety contract (an
                        # evaluation that accepts only 'test'): never suggest widening them.
                        yield Difference(f"split {split!r} may be produced but the consumer "
                                         f"accepts only {', '.join(required.splits)}",
                                         f"give the consumer a manifest with only "
                                         f"{', '.join(required.splits)} (stop producing "
                                         f"{split!r}, or select those splits in a step before "
                                         f"it)")
        for attr in ("id_column", "split_column"):
            if getattr(self, attr) != getattr(required, attr):
                yield Difference(f"{attr} is {getattr(self, attr)!r} but the consumer reads "
                                 f"{getattr(required, attr)!r}",
                                 f"declare the same {attr} on both ports")

    def validate(self, path: Path) -> None:
        """Check a manifest CSV: its columns, split names, overlaps and required splits.

        Raises:
            ContractError: naming the file, the row (line) and the example id at fault.
        """
        path = Path(path)
        check_exists(self, path)
        with Reading(self.label, path) as reading, \
                path.open(newline="", encoding="utf-8-sig") as fh:
            reading.csv = reader = csv.reader(fh)
            header = next(reader, None) or []
            for col in (self.id_column, self.split_column):
                if col not in header:
                    raise ContractError(f"the header {excerpt(','.join(header)) or '(empty)'} "
                                        f"has no "
                                        f"column {col!r}; {self.label} expects "
                                        f"{self.id_column},{self.split_column}",
                                        hint=f"write a header row naming {col!r}",
                                        file=str(path), line=1, column=col)
            rows = _read_rows(reader)
        id_at, split_at = header.index(self.id_column), header.index(self.split_column)
        counts = self._fast_counts(rows, id_at, split_at)
        if counts is None:  # something is wrong: find the first bad row, with its line
            counts = self._scan(path, id_at, split_at)
        for split in self.required:
            if not counts.get(split):
                present = ", ".join(f"{k} ({v})" for k, v in sorted(counts.items())) or "none"
                raise ContractError(f"split {split!r} has no examples; {self.label} requires "
                                    f"it (present: {present})",
                                    hint=f"assign some examples to {split!r}", file=str(path),
                                    key=split)

    def _fast_counts(self, rows: list[list[str]], id_at: int, split_at: int
                     ) -> dict[str, int] | None:
        """Examples per split when every row is fine (whole-column work at C speed), else None."""
        if not all(rows):
            rows = [r for r in rows if r]
        if rows and min(map(len, rows)) <= max(id_at, split_at):
            return None
        ids = list(map(itemgetter(id_at), rows))
        splits = list(map(itemgetter(split_at), rows))
        counts = Counter(splits)
        if self.splits is not None and not counts.keys() <= set(self.splits):
            return None
        unique = len(set(ids)) if self.disjoint else len(set(zip(ids, splits)))
        return dict(counts) if unique == len(ids) else None

    def _scan(self, path: Path, id_at: int, split_at: int) -> dict[str, int]:
        """Row by row, tracking lines, to raise at the first row at fault."""
        with Reading(self.label, path) as reading, \
                path.open(newline="", encoding="utf-8-sig") as fh:
            reading.csv = reader = csv.reader(fh)
            next(reader, None)
            width = max(id_at, split_at)
            allowed = None if self.splits is None else frozenset(self.splits)
            seen: dict[str, tuple[str, int]] = {}
            pairs: dict[tuple[str, str], int] = {}
            counts: dict[str, int] = {}
            line = reader.line_num
            for row in reader:
                start, line = line + 1, reader.line_num
                if not row:
                    continue
                if len(row) <= width:
                    raise ContractError(f"row has {len(row)} field(s); {self.label} expects "
                                        f"{self.id_column!r} and {self.split_column!r}",
                                        hint="write one id and one split on every row",
                                        file=str(path), line=start)
                example, split = row[id_at], row[split_at]
                if allowed is not None and split not in allowed:
                    raise ContractError(f"id {example!r} is assigned to split {split!r}, which "
                                        f"is not one of {', '.join(self.splits or ())}",
                                        hint="use one of the declared split names",
                                        file=str(path), line=start, key=example)
                first = seen.setdefault(example, (split, start))
                if first[1] != start and ((example, split) in pairs or self.disjoint):
                    twice = (example, split) in pairs
                    what = (f"listed twice in split {split!r} (lines "
                            f"{pairs[example, split]} and {start})"
                            if twice else f"in split {first[0]!r} (line {first[1]}) and in "
                            f"split {split!r}")
                    raise ContractError(f"id {example!r} is {what}; {self.label} promises "
                                        f"{'one row per id' if twice else 'disjoint splits'}",
                                        hint="assign every example to exactly one split",
                                        file=str(path), line=start, key=example)
                pairs[example, split] = start
                counts[split] = counts.get(split, 0) + 1
        return counts

    def spec(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "version": str(self.version),
                "splits": None if self.splits is None else list(self.splits),
                "required": list(self.required), "disjoint": self.disjoint,
                "id_column": self.id_column, "split_column": self.split_column}


def _read_rows(reader) -> list[list[str]]:
    # Pausing the collector: each row is a new list, and the many gen-0 collections that
    # trigger find nothing to free; they would double the time of the read.
    enabled = gc.isenabled()
    gc.disable()
    try:
        return list(reader)
    finally:
        if enabled:
            gc.enable()
