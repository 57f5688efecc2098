"""Reading and writing the YAML files of an Azure ML export: fast dumps, line-aware loads.

Knows YAML, not Azure ML: what the documents mean is for ``export``/``importer`` to say.
"""
from __future__ import annotations

import math
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

import yaml

from mlpipe.errors import LoadError

_Dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def dump(doc: Any) -> str:
    """Block-style YAML, keys in the order the document has them, long lines kept whole."""
    return yaml.dump(doc, Dumper=_Dumper, sort_keys=False, default_flow_style=False,
                     allow_unicode=True, width=1_000_000)


def write(path: Path, doc: Any) -> Path:
    """Write ``doc`` to ``path`` through a temporary file, so a reader never sees half of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        # mkstemp makes the file 0600: give it the mode open() would (0666 less the umask),
        # so colleagues the umask lets read it can
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(dump(doc))
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def _umask() -> int:
    mask = os.umask(0o022)  # the only way to read it; set back at once
    os.umask(mask)
    return mask


class Mapping(dict):
    """A YAML mapping that remembers the line of each key (``lines[key]``, 1-based)."""

    __slots__ = ("line", "lines")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.line = 0
        self.lines: dict[Any, int] = {}

    def line_of(self, key: Any) -> int:
        return self.lines.get(key, self.line)


class _TooDeep(Exception):
    pass


class _LineLoader(yaml.SafeLoader):
    def fetch_flow_collection_start(self, TokenClass: Any) -> None:   # PyYAML names it so
        # stop the scanner itself at the depth limit (issue 37): it keeps a possible key for
        # every open '[' or '{' and checks them all at each token it reads ahead
        if self.flow_level >= MAX_DEPTH:
            raise _TooDeep
        super().fetch_flow_collection_start(TokenClass)


def _construct_mapping(loader: _LineLoader, node: yaml.MappingNode) -> Mapping:
    loader.flatten_mapping(node)
    out = Mapping()
    out.line = node.start_mark.line + 1
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        out[key] = loader.construct_object(value_node, deep=True)
        out.lines[key] = key_node.start_mark.line + 1
    return out


_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


#: How deep a YAML document may nest mappings and lists (a job nests fewer than ten).
MAX_DEPTH = 100
#: The largest job file read (Azure ML job YAML is a few KiB).
MAX_FILE_BYTES = 8 << 20


#: How many values a document may expand to (YAML aliases repeat a value without copying it).
MAX_VALUES = 1_000_000


def _deeper_than(doc: Any, limit: int) -> bool:
    stack, deepest = [(doc, 0)], {}
    while stack:
        value, depth = stack.pop()
        if depth > limit:
            return True
        if not isinstance(value, (dict, list)) or deepest.get(id(value), -1) >= depth:
            continue  # an alias seen before at this depth or deeper
        deepest[id(value)] = depth
        stack.extend((v, depth + 1) for v in (value.values() if isinstance(value, dict)
                                              else value))
    return False


def _short(value: Any) -> str:
    text = repr(dict(value) if isinstance(value, dict) else value)
    return text if len(text) <= 50 else text[:47] + "..."


def _unnamed_type(doc: Any) -> Any:
    """The first ``type:`` holding a list or mapping (every reader looks types up by name); a
    port or job named ``type`` under ``inputs``/``outputs``/``jobs`` is a name, not a type."""
    stack, seen = [(doc, None)], set()
    while stack:
        value, parent = stack.pop()
        if not isinstance(value, (dict, list)) or id(value) in seen:
            continue
        seen.add(id(value))
        if isinstance(value, dict):
            names = parent in ("inputs", "outputs", "jobs")  # its keys name ports or jobs
            kind = value.get("type")
            if isinstance(kind, (dict, list)) and not names:
                return kind
            stack.extend((v, None if names else k) for k, v in value.items())
        else:
            stack.extend((v, None) for v in value)
    return None


def _non_finite(doc: Any) -> bool:
    stack, seen = [doc], set()
    while stack:
        value = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            return True
        if isinstance(value, (dict, list)) and id(value) not in seen:
            seen.add(id(value))
            stack.extend(value.values() if isinstance(value, dict) else value)
            if isinstance(value, dict):
                stack.extend(value)  # a key may be a number too
    return False


def _expanded_size(value: Any, known: dict[int, int]) -> int:
    """How many values ``value`` stands for with every alias expanded (as a consumer that
    copies the document would make them); only called on a document of bounded depth."""
    if not isinstance(value, (dict, list)):
        return 1
    if id(value) not in known:
        known[id(value)] = 1 + sum(_expanded_size(v, known) for v in (
            value.values() if isinstance(value, dict) else value))
    return known[id(value)]


def load(path: str | os.PathLike[str], what: str) -> Mapping:
    """The mapping in the YAML file at ``path`` (keys carry their lines).

    Raises:
        LoadError: no such file, a YAML syntax error, or a document that is not a mapping.
    """
    shown = str(path)
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):  # a FIFO or device would be waited on
            raise LoadError(f"{shown} is not a regular file", hint=f"give the path of {what}",
                            file=shown)
        if st.st_size > MAX_FILE_BYTES:
            raise LoadError(f"{shown} is {st.st_size:,} bytes, more than the "
                            f"{MAX_FILE_BYTES:,} mlpipe reads as {what}",
                            hint=f"give the path of {what}", file=shown)
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise LoadError(f"no such file: {shown}", hint=f"give the path of {what}",
                        file=shown) from None
    except OSError as exc:
        raise LoadError(f"cannot read {shown}: {exc.strerror}", file=shown) from None
    except UnicodeDecodeError as exc:
        raise LoadError(f"{shown} is not UTF-8 text (byte {exc.start}: {exc.reason})",
                        hint=f"give {what} saved as UTF-8", file=shown) from None
    try:
        doc = yaml.load(text, Loader=_LineLoader)
    except (RecursionError, _TooDeep):
        doc = None
        deep = True
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        raise LoadError(f"YAML syntax error: {problem}", hint="fix the YAML and run again",
                        file=shown, line=mark.line + 1 if mark else None) from None
    else:
        deep = _deeper_than(doc, MAX_DEPTH)
    if deep:
        raise LoadError(f"{shown} nests collections more than {MAX_DEPTH} levels deep",
                        hint=f"give {what}; Azure ML job YAML nests a few levels", file=shown)
    bad = _unnamed_type(doc)
    if bad is not None:
        raise LoadError(f"type: is {_short(bad)}, not the name of a type",
                        hint="write type: as a name (pipeline, command, uri_folder, integer, "
                             "...)", file=shown, line=getattr(bad, "line", None) or None)
    if _non_finite(doc):
        raise LoadError(f"{shown} holds .nan or .inf, which is not a number Azure ML or a JSON "
                        f"document can hold", hint="give a finite number", file=shown)
    if _expanded_size(doc, {}) > MAX_VALUES:
        raise LoadError(f"{shown} expands to more than {MAX_VALUES:,} values through its YAML "
                        f"aliases", hint=f"give {what} without aliases that multiply it",
                        file=shown)
    if not isinstance(doc, Mapping):
        raise LoadError(f"{shown} holds a YAML {type(doc).__name__}, not {what}",
                        hint=f"give the path of {what}", file=shown)
    return doc


def fast_load(path: str | os.PathLike[str]) -> Any:
    """Plain load with the C loader where available (no line numbers)."""
    with open(path, encoding="utf-8") as fh:
        return yaml.load(fh, Loader=_Loader)
