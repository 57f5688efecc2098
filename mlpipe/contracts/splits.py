"""Split manifest contracts: example id -> split name, required splits, disjointness.

A manifest is a CSV file with an id column and a split column (``id,split`` by default).
Validation streams it with the standard library. Knows nothing of specs.
"""
from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from mlpipe.artifacts import AssetType
from mlpipe.contracts.base import Contract, Difference, check_exists
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

    name: str | None = None
    splits: tuple[str, ...] | None = None
    required: tuple[str, ...] = ()
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
                        yield Difference(f"split {split!r} may be produced but the consumer "
                                         f"accepts only {', '.join(required.splits)}",
                                         f"add {split!r} to the consumer's splits or stop "
                                         f"producing it")
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
        with path.open(newline="", encoding="utf-8") as fh:
            reader = csv.reader(fh)
            header = next(reader, None) or []
            for col in (self.id_column, self.split_column):
                if col not in header:
                    raise ContractError(f"the header {','.join(header) or '(empty)'} has no "
                                        f"column {col!r}; {self.label} expects "
                                        f"{self.id_column},{self.split_column}",
                                        hint=f"write a header row naming {col!r}",
                                        file=str(path), line=1, column=col)
            id_at, split_at = header.index(self.id_column), header.index(self.split_column)
            width = max(id_at, split_at)
            allowed = None if self.splits is None else frozenset(self.splits)
            seen: dict[str, tuple[str, int]] = {}
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
                                        f"is not one of {', '.join(self.splits)}",
                                        hint="use one of the declared split names",
                                        file=str(path), line=start, key=example)
                first = seen.get(example)
                if first is None:
                    seen[example] = (split, start)
                    counts[split] = counts.get(split, 0) + 1
                    continue
                if first[0] != split and not self.disjoint:
                    counts[split] = counts.get(split, 0) + 1
                    continue
                what = (f"in split {first[0]!r} (line {first[1]}) and in split {split!r}"
                        if first[0] != split else f"listed twice in split {split!r} (lines "
                        f"{first[1]} and {start})")
                raise ContractError(f"id {example!r} is {what}; {self.label} promises "
                                    f"{'disjoint splits' if first[0] != split else 'one row per id'}",
                                    hint="assign every example to exactly one split",
                                    file=str(path), line=start, key=example)
        for split in self.required:
            if not counts.get(split):
                present = ", ".join(f"{k} ({v})" for k, v in sorted(counts.items())) or "none"
                raise ContractError(f"split {split!r} has no examples; {self.label} requires "
                                    f"it (present: {present})",
                                    hint=f"assign some examples to {split!r}", file=str(path),
                                    key=split)

    def spec(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "version": str(self.version),
                "splits": None if self.splits is None else list(self.splits),
                "required": list(self.required), "disjoint": self.disjoint,
                "id_column": self.id_column, "split_column": self.split_column}
