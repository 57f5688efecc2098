"""Label map contracts: the exact class -> code encoding, checked on edges and in files.

A label-map file is a JSON object ``{"class": code, ...}``. Knows nothing of specs.
"""
from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mlpipe.artifacts import AssetType
from mlpipe.contracts.base import Contract, Difference, check_exists, read_json
from mlpipe.errors import ContractError, DefinitionError


@dataclass(frozen=True, eq=True)
class LabelMap(Contract):
    """The encoding of class names as integer codes.

    Args:
        name: the label map's name; versions are compared between maps of the same name.
        classes: the classes in code order (``["ok", "scratch"]`` means ok=0, scratch=1), or
            a mapping ``{"ok": 0, "scratch": 1}`` for explicit codes. None: any encoding.
        version: ``MAJOR`` or ``MAJOR.MINOR``.

    Example:
        >>> LABELS = LabelMap("defect-labels", classes=["ok", "scratch", "dent"], version="2")
        >>> LABELS.encoding["dent"]
        2
    """

    kind = "label-map"
    transport = AssetType.URI_FILE
    holds_examples = False

    name: str | None = None
    classes: Any = None
    version: str = "1"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.classes is None:
            return
        if isinstance(self.classes, Mapping):
            pairs = tuple(sorted(((str(k), v) for k, v in self.classes.items()),
                                 key=lambda kv: (kv[1], kv[0])))
        elif isinstance(self.classes, Sequence) and not isinstance(self.classes, str):
            pairs = tuple((str(c), i) for i, c in enumerate(self.classes))
        else:
            raise DefinitionError(f"LabelMap {self.name!r}: classes must be a list of names or "
                                  f"a mapping name -> code, got {self.classes!r}",
                                  hint='write classes=["ok", "scratch"]')
        names = [k for k, _ in pairs]
        codes = [v for _, v in pairs]
        if any(isinstance(v, bool) or not isinstance(v, int) for v in codes):
            raise DefinitionError(f"LabelMap {self.name!r}: codes must be integers, got "
                                  f"{codes!r}", hint="give each class an integer code")
        values: list[Any]
        for values, what in ((names, "class"), (codes, "code")):
            dupes = sorted({v for v in values if values.count(v) > 1}, key=str)
            if dupes:
                raise DefinitionError(f"LabelMap {self.name!r}: {what} {dupes[0]!r} appears "
                                      f"twice", hint="give each class one distinct code")
        object.__setattr__(self, "classes", pairs)

    @property
    def encoding(self) -> dict[str, int]:
        """``{class: code}``; empty when the map promises no particular encoding."""
        return dict(self.classes or ())

    @property
    def names(self) -> tuple[str, ...]:
        """Class names in code order."""
        return tuple(k for k, _ in self.classes or ())

    def spec(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "version": str(self.version),
                "classes": None if self.classes is None else self.encoding}

    def differences(self, required: Contract) -> Iterator[Difference]:
        assert isinstance(required, LabelMap)
        yield from encoding_differences(self, required)

    def write(self, path: Path) -> None:
        """Write this encoding as a label-map file (a step body's helper)."""
        Path(path).write_text(json.dumps(self.encoding, indent=2) + "\n")

    def validate(self, path: Path) -> None:
        """Check a label-map JSON file: well formed, distinct codes, this exact encoding.

        Raises:
            ContractError: naming the file and the class whose code differs or is missing.
        """
        path = Path(path)
        check_exists(self, path)
        found = read_label_file(path, self.label)
        check_encoding(self, found, str(path))


def encoding_differences(have: LabelMap, want: LabelMap, what: str = "") -> Iterator[Difference]:
    """Each class whose code differs, is missing or is extra between two label maps."""
    if want.classes is None:
        return
    if have.classes is None:
        yield Difference(f"{what}{have.label} promises no encoding but the consumer requires "
                         f"{_show(want.encoding)}",
                         f"declare classes=[...] on the producer's {have.kind}",
                         "label-encoding-mismatch")
        return
    mine, theirs = have.encoding, want.encoding
    for cls, code in theirs.items():
        if cls not in mine:
            yield Difference(f"{what}class {cls!r} (code {code} for the consumer) is missing "
                             f"from the producer's encoding {_show(mine)}",
                             "use one label map on both ports", "label-encoding-mismatch")
        elif mine[cls] != code:
            yield Difference(f"{what}class {cls!r} is encoded {mine[cls]} by the producer but "
                             f"{code} by the consumer",
                             "use one label map on both ports (import it from one module)",
                             "label-encoding-mismatch")
    for cls in mine.keys() - theirs.keys():
        yield Difference(f"{what}class {cls!r} (code {mine[cls]}) is produced but the "
                         f"consumer's encoding {_show(theirs)} lacks it",
                         "use one label map on both ports", "label-encoding-mismatch")


def _show(encoding: dict[str, int]) -> str:
    return "{" + ", ".join(f"{k}={v}" for k, v in encoding.items()) + "}"


def read_label_file(path: Path, label: str) -> dict[str, int]:
    """The ``{class: code}`` object in a label-map file, or ContractError."""
    data = read_json(label, path, "the file", 'an object {"class": code, ...}',
                     hint="write the label map as JSON")
    if not isinstance(data, dict):
        raise ContractError(f"the file holds a JSON {type(data).__name__}; {label} expects an "
                            f'object {{"class": code, ...}}', hint="write the label map as "
                            "a JSON object", file=str(path))
    seen: dict[int, str] = {}
    for cls, code in data.items():
        if isinstance(code, bool) or not isinstance(code, int):
            raise ContractError(f"class {cls!r} has code {code!r}; {label} expects an "
                                f"integer", hint="give each class an integer code",
                                file=str(path), key=cls)
        if code in seen:
            raise ContractError(f"classes {seen[code]!r} and {cls!r} share code {code}",
                                hint="give each class its own code", file=str(path), key=cls)
        seen[code] = cls
    return data


def check_encoding(expected: LabelMap, found: dict[str, int], where: str) -> None:
    """Raise ContractError at the first class whose code in ``found`` is not the expected one."""
    if expected.classes is None:
        return
    want = expected.encoding
    for cls, code in want.items():
        if cls not in found:
            raise ContractError(f"class {cls!r} is missing; {expected.label} encodes it "
                                f"as {code}", hint=f"write the encoding {_show(want)}",
                                file=where, key=cls)
        if found[cls] != code:
            raise ContractError(f"class {cls!r} has code {found[cls]} but "
                                f"{expected.label} encodes it as {code}",
                                hint=f"write the encoding {_show(want)}", file=where, key=cls)
    for cls in found:
        if cls not in want:
            raise ContractError(f"class {cls!r} (code {found[cls]}) is not in "
                                f"{expected.label} {_show(want)}",
                                hint="remove the class or add it to the label map (a new "
                                     "major version)", file=where, key=cls)
