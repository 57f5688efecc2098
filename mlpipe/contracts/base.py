"""The base every contract type derives from: versioning, differences, run-time validation.

Knows nothing of specs, graphs, checks or backends; imports only errors and artifact kinds.
"""
from __future__ import annotations

import codecs
import csv
import dataclasses
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from mlpipe.artifacts import AssetType
from mlpipe.errors import ContractError, DefinitionError

if TYPE_CHECKING:
    from typing_extensions import TypeIs

_Entry = TypeVar("_Entry")
_VERSION = re.compile(r"^(\d+)(?:\.(\d+))?$")


@dataclass(frozen=True, slots=True)
class Difference:
    """One way a producer's contract fails a consumer's requirement.

    Args:
        message: the concrete difference, both sides quoted (``class 'dent' is 2 here, 1 there``).
        hint: what to change, imperative.
        kind: which MP4xx diagnostic reports it (its name in ``mlpipe.codes``);
            user-defined contracts normally keep the default.
    """

    message: str
    hint: str
    kind: str = "contract-requirement-unmet"


def parse_version(version: str) -> tuple[int, int]:
    """``"2"`` -> ``(2, 0)``, ``"2.1"`` -> ``(2, 1)``; anything else raises ValueError."""
    m = _VERSION.match(str(version))
    if not m:
        raise ValueError(f"contract version {version!r} is not MAJOR or MAJOR.MINOR")
    return int(m.group(1)), int(m.group(2) or 0)


def version_satisfies(produced: str, required: str) -> bool:
    """The versioning rule: same MAJOR, and the producer's MINOR at least the consumer's.

    A minor version only widens a contract (adds optional columns, classes of metrics the
    consumer may ignore); a major version changes meaning, so it never matches another major.
    """
    p_major, p_minor = parse_version(produced)
    r_major, r_minor = parse_version(required)
    return p_major == r_major and p_minor >= r_minor


def plain(value: Any) -> Any:
    """A JSON-able form of a contract field (nested contracts and value types by ``to_dict``)."""
    if isinstance(value, Contract):
        return value.spec()
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    return value


#: contract kind -> its class, filled as contract types are defined (``mlpipe validate KIND``)
KINDS: dict[str, type["Contract"]] = {}


class Contract:
    """A versioned statement of what an artifact means.

    Subclasses are frozen dataclasses whose every field has a default, so ``Kind()`` is the
    permissive requirement "any artifact of this kind". They set ``kind`` (kebab-case) and
    ``transport`` (the Azure ML type the artifact travels as), and override
    :meth:`differences` (the compile-time rule) and :meth:`validate` (the run-time check).
    A port may be annotated with the class itself or with an instance.

    Example:
        >>> @dataclass(frozen=True)
        ... class Vocabulary(Contract):
        ...     kind = "vocabulary"
        ...     transport = AssetType.URI_FILE
        ...     name: str | None = None
        ...     size: int | None = None
        ...     version: str = "1"
    """

    kind: ClassVar[str] = "contract"
    transport: ClassVar[AssetType] = AssetType.URI_FOLDER
    #: Modules the run-time validation imports, each with how to install it
    #: (``(("pyarrow", "pip install 'mlpipe-aml[tabular]'"),)``): ``mlpipe check`` says when one is
    #: missing here (MP415) instead of a run failing when it validates.
    requires: ClassVar[tuple[tuple[str, str], ...]] = ()
    #: The suffix mlpipe gives a file output of this contract (``".csv"``), so the file it
    #: names is one its own validator accepts. Empty: the port's name as it is.
    file_suffix: ClassVar[str] = ""
    #: Whether an artifact of this contract holds examples (a data set: images, a table) as
    #: opposed to a description of them (a label map, a split manifest, a report, a model).
    #: None: not stated. The evaluation checks compare only what holds examples.
    holds_examples: ClassVar[bool | None] = None
    version: str = "1"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "kind" in cls.__dict__:
            KINDS[cls.kind] = cls

    def __post_init__(self) -> None:
        try:
            parse_version(self.version)
        except ValueError as exc:
            raise DefinitionError(f"{type(self).__name__}: {exc}",
                                  hint='write the version as "2" or "2.1"') from None

    def spec(self) -> dict[str, Any]:
        """Canonical, JSON-able description of this contract; it goes into spec digests."""
        if dataclasses.is_dataclass(self):
            fields = {f.name: plain(getattr(self, f.name)) for f in dataclasses.fields(self)}
        else:
            fields = {k: plain(v) for k, v in vars(self).items() if not k.startswith("_")}
        return {"kind": self.kind, **fields, "version": str(self.version)}

    @property
    def label(self) -> str:
        """A short name for messages: ``label-map:defect-labels`` or ``image-folder``."""
        name = getattr(self, "name", None)
        return f"{self.kind}:{name}" if name else self.kind

    def differences(self, required: "Contract") -> Iterator[Difference]:
        """How this (the producer's) contract fails ``required`` (the consumer's).

        Called only when ``self`` is an instance of ``type(required)`` and their versions
        are compatible. The default asks for equal descriptions, name and version aside;
        contract types override it with their own widening rules.
        """
        mine = {k: v for k, v in self.spec().items() if k not in ("name", "version")}
        theirs = {k: v for k, v in required.spec().items() if k not in ("name", "version")}
        for key in sorted(set(mine) | set(theirs)):
            if mine.get(key) != theirs.get(key):
                yield Difference(f"{key} is {mine.get(key)!r} but the consumer requires "
                                 f"{theirs.get(key)!r}",
                                 f"declare the same {key} on both ports")

    def validate(self, path: Path) -> None:
        """Check the artifact at ``path``; raise ContractError naming what is wrong.

        The default checks that the path exists and is a file or a folder as the transport
        says; contract types extend it.
        """
        check_exists(self, path)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.spec()!r})"


def declared_entries(owner: str, entries: Iterable[Any], kind: type[_Entry], what: str, *,
                     example: str) -> tuple[_Entry, ...]:
    """The named entries of a contract (a report's metrics, a schema's columns) as a tuple, each
    a ``kind`` value and each name declared once.

    Raises:
        DefinitionError: ``{owner}: {what}s must be Kind(...) values`` for an entry of another
            type (``example`` is the hint), or ``{owner} declares {what} 'x' twice`` for the
            first name (in sorted order) declared more than once.
    """
    found: tuple[Any, ...] = tuple(entries)
    if not all(isinstance(e, kind) for e in found):
        raise DefinitionError(f"{owner}: {what}s must be {kind.__name__}(...) values",
                              hint=example)
    names = [e.name for e in found]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise DefinitionError(f"{owner} declares {what} {dupes[0]!r} twice",
                              hint=f"declare each {what} once")
    return found


def check_exists(contract: Contract, path: Path) -> None:
    """Raise ContractError unless ``path`` exists as a file or a folder, as ``contract`` travels."""
    path = Path(path)
    wants_file = contract.transport is AssetType.URI_FILE
    if not path.exists():
        raise ContractError(f"nothing exists here; {contract.label} expects a "
                            f"{'file' if wants_file else 'folder'} there",
                            hint="write the artifact to this path", file=str(path))
    if wants_file and not path.is_file():
        raise ContractError(f"this is a folder; {contract.label} expects a file",
                            hint="write a single file", file=str(path))
    if not wants_file and not path.is_dir():
        raise ContractError(f"this is a file; {contract.label} expects a folder",
                            hint="write a folder", file=str(path))


class Reading:
    """A contract reading one file: what a hostile file makes the reader raise (bytes that are
    not UTF-8, a row the csv module refuses, a structure nested past the interpreter's depth)
    leaves it as one ContractError naming the file and where, never as a traceback.

    Example:
        >>> with Reading(self.label, path) as r, path.open(encoding="utf-8") as fh:
        ...     r.csv = reader = csv.reader(fh)
    """

    def __init__(self, label: str, file: Path) -> None:
        self.label, self.file = label, Path(file)
        self.csv: Any = None  # the csv reader, whose line_num says where a csv.Error is

    def __enter__(self) -> Reading:
        return self

    def __exit__(self, kind: Any, exc: BaseException | None, tb: Any) -> None:
        if isinstance(exc, UnicodeDecodeError):
            raise not_utf8(self.label, self.file) from None
        if isinstance(exc, csv.Error):
            line = getattr(self.csv, "line_num", None) or None
            raise ContractError(f"the file is not CSV that can be read ({exc}); {self.label} "
                                f"reads it as CSV", hint="fix the row, or rewrite the file as "
                                "CSV", file=str(self.file), line=line) from None
        if isinstance(exc, RecursionError):
            raise ContractError(f"the file nests its values deeper than can be read; "
                                f"{self.label} does not describe such a structure",
                                hint="rewrite the file in the structure its contract "
                                     "describes", file=str(self.file)) from None


def read_json(label: str, path: Path, what: str, expects: str, hint: str) -> Any:
    """The JSON value in the file ``path``, read under :class:`Reading`; where it is not JSON,
    one ContractError at the line: ``{what} is not JSON (why); {label} expects {expects}``."""
    try:
        with Reading(label, path):
            return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ContractError(f"{what} is not JSON ({exc}); {label} expects {expects}", hint=hint,
                            file=str(path), line=exc.lineno) from None


def excerpt(text: str, limit: int = 80) -> str:
    """``text`` as one line a message can quote: as is when short and printable, else its
    ``repr`` cut at ``limit`` characters (a quote in a hostile header can swallow the file)."""
    if len(text) <= limit and text.isprintable():
        return text
    shown = repr(text[:limit])
    return shown + ("..." if len(text) > limit else "")


def not_utf8(label: str, file: Path) -> ContractError:
    """The error for a file that is not UTF-8 text, naming its first bad byte, the offset and
    the line (the file is read again, in binary, to find it)."""
    where = first_bad_utf8(file)
    if where is None:  # changed since it was read: say so without a position
        return ContractError(f"the file is not UTF-8 text; {label} reads it as UTF-8",
                             hint="save the file as UTF-8 text", file=str(file))
    offset, line, byte = where
    shown = f"byte 0x{byte:02x}" if byte is not None else "a truncated character"
    return ContractError(f"{shown} at offset {offset} is not UTF-8; {label} reads the file "
                         f"as UTF-8 text",
                         hint="save the file as UTF-8 text (or fix that byte)", file=str(file),
                         line=line)


def first_bad_utf8(file: Path, chunk: int = 1 << 20) -> tuple[int, int, int | None] | None:
    """``(offset, line, byte)`` of the first byte of ``file`` that is not UTF-8 (byte None: the
    file ends inside a character), or None when it all decodes."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    offset, lines = 0, 0
    try:
        with open(file, "rb") as fh:
            while True:
                data = fh.read(chunk)
                pending = decoder.getstate()[0]
                try:
                    decoder.decode(data, final=not data)
                except UnicodeDecodeError as exc:
                    seen = pending + data
                    start = offset - len(pending) + exc.start
                    byte = seen[exc.start] if exc.start < len(seen) and data else None
                    return start, lines + seen[:exc.start].count(b"\n") + 1, byte
                if not data:
                    return None
                lines += data.count(b"\n")
                offset += len(data)
    except OSError:
        return None


def _is_contract_class(value: object) -> TypeIs[type[Contract]]:
    return isinstance(value, type) and issubclass(value, Contract)


def as_instance(contract: Contract | type[Contract]) -> Contract:
    """The instance a contract class stands for: its permissive default ``Kind()``."""
    return contract() if _is_contract_class(contract) else contract


def contract_spec(contract: Contract | type[Contract]) -> dict[str, Any]:
    """The digestable description of a contract given as a class or an instance."""
    if _is_contract_class(contract):
        return {"kind": contract.kind, "version": None, "any": True}
    return contract.spec()


def contract_label(contract: Contract | type[Contract]) -> str:
    """A short name for messages: ``label-map:defect-labels`` or ``image-folder``."""
    if _is_contract_class(contract):
        return contract.kind
    return contract.label


def contract_transport(contract: Contract | type[Contract]) -> AssetType:
    return contract.transport


def output_file_name(contract: Contract | type[Contract] | None, port: str) -> str:
    """The file name a ``uri_file`` output called ``port`` gets: ``table.csv`` for a
    TabularSchema, the port's name where the contract asks for no suffix.

    Example:
        >>> output_file_name(TabularSchema("parts"), "table")
        'table.csv'
    """
    suffix = getattr(contract, "file_suffix", "") if contract is not None else ""
    return f"{port}{suffix}" if suffix and not port.endswith(suffix) else port


def missing_requirements(contract: Contract | type[Contract]) -> list[tuple[str, str]]:
    """The modules ``contract``'s validation needs that cannot be imported here, each with
    how to install it. Finds them without importing them."""
    from mlpipe.modules import module_file

    missing = []
    for module, install in getattr(contract, "requires", ()):
        found = module_file(module)[0] is not None
        if not found:
            missing.append((module, install))
    return missing


def is_contract(value: object) -> bool:
    """Whether ``value`` is a contract class or instance."""
    return isinstance(value, Contract) or _is_contract_class(value)
