"""Image folder contracts: the folder layout, the class and split names, the file kinds.

A layout is a path template of ``{split}``, ``{class}`` and a final ``{file}`` segment; a
folder may instead list its files in a CSV manifest. Knows nothing of specs.
"""
from __future__ import annotations

import csv
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mlpipe.artifacts import AssetType
from mlpipe.contracts.base import Contract, Difference, Reading, check_exists
from mlpipe.errors import ContractError, DefinitionError

#: file kind -> (suffixes, the bytes its files start with)
FILE_KINDS: dict[str, tuple[tuple[str, ...], tuple[bytes, ...]]] = {
    "pgm": ((".pgm",), (b"P5", b"P2")),
    "png": ((".png",), (b"\x89PNG\r\n\x1a\n",)),
    "jpeg": ((".jpg", ".jpeg"), (b"\xff\xd8\xff",)),
    "bmp": ((".bmp",), (b"BM",)),
    "tiff": ((".tif", ".tiff"), (b"II*\x00", b"MM\x00*")),
}
_SEGMENTS = ("{split}", "{class}")
_SINGULAR = {"classes": "class", "splits": "split", "file_kinds": "file kind"}


@dataclass(frozen=True, eq=True)
class ImageFolder(Contract):
    """A folder of image files laid out by split and/or class, or listed in a manifest.

    Args:
        name: the folder contract's name.
        layout: path template, e.g. ``"{class}/{file}"`` (one folder per class),
            ``"{split}/{class}/{file}"`` or ``"{file}"`` (flat, usually with a manifest).
        classes: the class folder names allowed (a list, or a LabelMap whose classes to use).
        splits: the split folder names allowed.
        file_kinds: the image kinds allowed: ``pgm``, ``png``, ``jpeg``, ``bmp``, ``tiff``.
        manifest: name of a CSV file in the folder with a ``file`` column listing every image
            (and a ``class`` column when classes are declared); None for no manifest.
        version: ``MAJOR`` or ``MAJOR.MINOR``.

    Example:
        >>> ImageFolder("defect-raw", layout="{class}/{file}", classes=LABELS, file_kinds=["pgm"])
    """

    kind = "image-folder"
    transport = AssetType.URI_FOLDER
    holds_examples = True

    name: str | None = None
    layout: str = "{class}/{file}"
    classes: Any = None
    splits: Sequence[str] | None = None
    file_kinds: Sequence[str] = tuple(FILE_KINDS)
    manifest: str | None = None
    version: str = "1"

    def __post_init__(self) -> None:
        super().__post_init__()
        parts = self.layout.split("/")
        if parts[-1] != "{file}" or any(p not in _SEGMENTS for p in parts[:-1]) or \
                len(set(parts)) != len(parts):
            raise DefinitionError(f"ImageFolder {self.name!r}: layout {self.layout!r} is not a "
                                  f"template of {{split}}/, {{class}}/ and a last {{file}}",
                                  hint='write e.g. layout="{split}/{class}/{file}"')
        classes = self.classes
        if classes is not None and hasattr(classes, "names"):
            classes = classes.names
        if classes is not None:
            object.__setattr__(self, "classes", tuple(str(c) for c in classes))
        if self.splits is not None:
            object.__setattr__(self, "splits", tuple(self.splits))
        kinds = (self.file_kinds,) if isinstance(self.file_kinds, str) else tuple(self.file_kinds)
        unknown = [k for k in kinds if k not in FILE_KINDS]
        if unknown or not kinds:
            raise DefinitionError(f"ImageFolder {self.name!r}: file kind "
                                  f"{unknown[0] if unknown else None!r} "
                                  f"is not one of {', '.join(FILE_KINDS)}",
                                  hint="use one of the listed file kinds")
        object.__setattr__(self, "file_kinds", kinds)

    def spec(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "version": str(self.version),
                "layout": self.layout, "classes": _list(self.classes),
                "splits": _list(self.splits), "file_kinds": list(self.file_kinds),
                "manifest": self.manifest}

    def differences(self, required: Contract) -> Iterator[Difference]:
        assert isinstance(required, ImageFolder)
        if self.layout != required.layout:
            yield Difference(f"layout is {self.layout!r} but the consumer reads "
                             f"{required.layout!r}", "declare the same layout on both ports")
        if required.manifest is not None and self.manifest != required.manifest:
            yield Difference(f"the consumer reads the manifest {required.manifest!r} but "
                             f"{self.label} promises {_opt(self.manifest)}",
                             "write the manifest the consumer reads and declare it")
        for what in ("classes", "splits", "file_kinds"):
            have, want = getattr(self, what), getattr(required, what)
            if want is None:
                continue
            if have is None:
                yield Difference(f"the consumer accepts only the {what} {', '.join(want)} but "
                                 f"{self.label} allows any", f"declare {what}=[...] on the "
                                 f"producer")
                continue
            extra = [v for v in have if v not in want]
            if extra and what == "splits":
                # The splits a consumer accepts are a safety contract (an evaluation that
                # reads only 'test'): never suggest widening them.
                yield Difference(f"split {extra[0]!r} may be produced but the consumer "
                                 f"accepts only {', '.join(want)}",
                                 f"give the consumer a folder with only {', '.join(want)} "
                                 f"(stop producing {extra[0]!r}, or select those splits in a "
                                 f"step before it)")
            elif extra:
                yield Difference(f"{_SINGULAR[what]} {extra[0]!r} may be produced but the "
                                 f"consumer accepts only {', '.join(want)}",
                                 f"stop producing {extra[0]!r}, or make the consumer handle it "
                                 f"and then add it to the consumer's {what}")

    def validate(self, path: Path) -> None:
        """Check every file of the folder against the layout, names and file kinds.

        Raises:
            ContractError: naming the offending file and what the layout expected there.
        """
        path = Path(path)
        check_exists(self, path)
        depth = len(self.layout.split("/"))
        parts = self.layout.split("/")
        images = []
        for f in sorted(p for p in path.rglob("*") if p.is_file()):
            rel = f.relative_to(path)
            if any(s.startswith(".") for s in rel.parts) or (
                    self.manifest is not None and rel.as_posix() == self.manifest):
                continue
            if len(rel.parts) != depth:
                raise ContractError(f"{rel.as_posix()!r} is {len(rel.parts)} level(s) deep but "
                                    f"{self.label} lays files out as {self.layout!r}",
                                    hint=f"place every image at {self.layout}",
                                    file=str(f), key=rel.as_posix())
            for segment, value in zip(parts, rel.parts):
                allowed = {"{class}": self.classes, "{split}": self.splits}.get(segment)
                if allowed is not None and value not in allowed:
                    raise ContractError(f"folder {value!r} of {rel.as_posix()!r} is not a "
                                        f"{segment.strip('{}')} of {self.label} "
                                        f"({', '.join(allowed)})",
                                        hint=f"use one of the declared {segment.strip('{}')} names",
                                        file=str(f), key=rel.as_posix())
            self._check_kind(f, rel.as_posix())
            images.append(rel.as_posix())
        if not images:
            raise ContractError(f"the folder holds no image file; {self.label} expects "
                                f"{self.layout!r} with {'/'.join(self.file_kinds)} files",
                                hint="write the images into the folder", file=str(path))
        if self.manifest is not None:
            self._check_manifest(path, images, self.manifest)

    def _check_kind(self, f: Path, rel: str) -> None:
        suffix = f.suffix.lower()
        kind = next((k for k in self.file_kinds if suffix in FILE_KINDS[k][0]), None)
        if kind is None:
            raise ContractError(f"{rel!r} is not a {'/'.join(self.file_kinds)} file (suffix "
                                f"{suffix or 'none'!r})", hint="remove it or declare its kind "
                                "in file_kinds", file=str(f), key=rel)
        with f.open("rb") as fh:
            head = fh.read(8)
        if not head.startswith(FILE_KINDS[kind][1]):
            raise ContractError(f"{rel!r} is named like a {kind} file but does not start "
                                f"like one (first bytes {head[:4]!r})",
                                hint="rewrite the image, or name it after its real kind",
                                file=str(f), key=rel)

    def _check_manifest(self, path: Path, images: list[str], name: str) -> None:
        manifest = path / name
        if not manifest.is_file():
            raise ContractError(f"the folder has no manifest {name!r}; {self.label} "
                                f"lists its images there", hint="write the manifest CSV",
                                file=str(manifest))
        with Reading(self.label, manifest) as reading, \
                manifest.open(newline="", encoding="utf-8-sig") as fh:
            reading.csv = reader = csv.DictReader(fh)
            if "file" not in (reader.fieldnames or []):
                raise ContractError("the manifest has no 'file' column", file=str(manifest),
                                    line=1, hint="write a header row with 'file'",
                                    column="file")
            listed = set()
            for row in reader:
                name = row["file"]
                if name not in images:
                    raise ContractError(f"the manifest lists {name!r}, which is not an image "
                                        f"of the folder", hint="remove the row or add the image",
                                        file=str(manifest), line=reader.line_num, key=name)
                cls = row.get("class")
                if self.classes is not None and cls not in self.classes:
                    raise ContractError(f"{name!r} has class {cls!r}, which is not one of "
                                        f"{', '.join(self.classes)}",
                                        hint="use one of the declared classes",
                                        file=str(manifest), line=reader.line_num, key=name)
                listed.add(name)
        unlisted = [i for i in images if i not in listed]
        if unlisted:
            raise ContractError(f"{unlisted[0]!r} is in the folder but not in the manifest",
                                hint="list every image in the manifest", file=str(manifest),
                                key=unlisted[0])


def _list(value):
    return None if value is None else list(value)


def _opt(value):
    return repr(value) if value else "none"
