"""The one reader of files a user hands mlpipe (keys, trust and qualification policies):
regular files only, a size bound, and YAML composed with alias and depth limits.

It reads and parses; what a document must hold is its caller's to check. Each refusal is one
:class:`~mlpipe.errors.UsageError` naming the file, never a traceback or a hang.
"""
from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import Any

from mlpipe.errors import UsageError

#: The largest file read whole (a policy or a key is a few KiB; 1 MiB leaves room).
MAX_BYTES = 1 << 20
#: The largest key file read (a P-256 PEM is under 300 bytes).
KEY_BYTES = 64 << 10
#: The deepest nesting of a YAML document (a policy is 4 deep).
MAX_DEPTH = 64
#: The most nodes a YAML document may stand for once its aliases are expanded.
MAX_NODES = 100_000

_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISDIR, "a folder"))


def read_bytes(path: str | os.PathLike[str], *, what: str, hint: str,
               limit: int = MAX_BYTES) -> bytes:
    """The bytes of the regular file at ``path``, at most ``limit`` of them.

    The file is opened without blocking (a FIFO with no writer does not hang the open) and
    judged by the open descriptor, so a file swapped after a check cannot slip through.

    Args:
        path: the file.
        what: what the file is, for the message (``"the trust policy"``).
        hint: what to do instead, for the message.
        limit: the most bytes accepted.

    Raises:
        UsageError: it cannot be opened, is not a regular file (a FIFO, a device, a socket, a
            folder), or holds more than ``limit`` bytes.

    Example:
        >>> read_bytes("policies/trust.yml", what="the trust policy", hint="...")[:11]
        b'identities:'
    """
    where = os.fspath(path)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(where, flags)
    except OSError as exc:
        if exc.errno == errno.ENXIO:   # a FIFO nobody writes to, or a socket
            raise _refused(where, what, "a FIFO or socket", hint) from None
        raise UsageError(f"cannot read {what} {where}: {exc.strerror or exc}",
                         hint=hint) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = next((k for test, k in _KINDS if test(st.st_mode)), "not a regular file")
            raise _refused(where, what, kind, hint)
        if st.st_size > limit:
            raise _too_big(where, what, st.st_size, limit, hint)
        chunks, total = [], 0
        while total <= limit:
            chunk = os.read(fd, min(1 << 16, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > limit:   # it grew while being read
            raise _too_big(where, what, total, limit, hint)
        return b"".join(chunks)
    except OSError as exc:
        raise UsageError(f"cannot read {what} {where}: {exc.strerror or exc}",
                         hint=hint) from None
    finally:
        os.close(fd)


def read_text(path: str | os.PathLike[str], *, what: str, hint: str,
              limit: int = MAX_BYTES) -> str:
    """:func:`read_bytes`, decoded as UTF-8 (a leading BOM dropped).

    Raises:
        UsageError: as :func:`read_bytes`, or the bytes are not UTF-8 text.
    """
    data = read_bytes(path, what=what, hint=hint, limit=limit)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UsageError(f"cannot read {what} {os.fspath(path)}: not UTF-8 text (byte "
                         f"{exc.start})", hint=hint) from None


def load_yaml(text: str | bytes, *, file: str, hint: str) -> Any:
    """The YAML document ``text``, as PyYAML's ``safe_load`` builds it, refused when it nests
    deeper than :data:`MAX_DEPTH` or its aliases expand to more than :data:`MAX_NODES` nodes
    (an alias bomb), before anything is built from it.

    Args:
        text: the document.
        file: the file it came from, which the error is located at.
        hint: what to do, for the error.

    Raises:
        UsageError: not YAML, more than one document, or past a limit; at the line where known.

    Example:
        >>> load_yaml("a: &x [1, 2]\\nb: *x\\n", file="p.yml", hint="...")
        {'a': [1, 2], 'b': [1, 2]}
    """
    import yaml

    loader = None
    try:
        loader = _bounded_loader(yaml)(text)
        return loader.get_single_data()
    except _Exceeded as exc:
        raise UsageError(f"not a document mlpipe reads: {exc.why}", file=file, line=exc.line,
                         hint=hint) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        why = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise UsageError(f"not valid YAML: {why}", file=file,
                         line=None if mark is None else mark.line + 1, hint=hint) from None
    except ValueError as exc:   # an integer past Python's digit limit
        raise UsageError(f"not a document mlpipe reads: a value in it cannot be read ({exc})",
                         file=file, hint=hint) from None
    finally:
        if loader is not None:
            loader.dispose()


class _Exceeded(Exception):
    def __init__(self, why: str, line: int | None = None) -> None:
        self.why, self.line = why, line
        super().__init__(why)


_LOADER: Any = None


def _bounded_loader(yaml: Any) -> Any:
    """A SafeLoader that counts, while composing, how deep it is and how many nodes the
    document stands for with each alias expanded (a node's count is remembered by its id)."""
    global _LOADER
    if _LOADER is not None:
        return _LOADER

    class Bounded(yaml.SafeLoader):
        def __init__(self, stream: Any) -> None:
            super().__init__(stream)
            self._depth = 0
            self._nodes = 0
            self._sizes: dict[int, int] = {}

        def fetch_flow_collection_start(self, token_class: Any) -> None:
            # stop the scanner itself at the limit: it keeps a possible key for every open
            # '[' or '{' and checks them all at each token it reads ahead
            if self.flow_level >= MAX_DEPTH:
                raise _Exceeded(f"it nests deeper than {MAX_DEPTH} levels",
                                self.get_mark().line + 1)
            super().fetch_flow_collection_start(token_class)

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                event = self.peek_event()
                node = self.anchors.get(event.anchor)
                if node is not None:
                    size = self._sizes.get(id(node))
                    if size is None:
                        raise _Exceeded(f"the alias *{event.anchor} refers to a node that "
                                        f"holds it (a recursive document)",
                                        event.start_mark.line + 1)
                    self._count(size)
                return super().compose_node(parent, index)
            self._depth += 1
            if self._depth > MAX_DEPTH:
                mark = self.peek_event().start_mark
                raise _Exceeded(f"it nests deeper than {MAX_DEPTH} levels", mark.line + 1)
            before = self._nodes
            try:
                node = super().compose_node(parent, index)
            finally:
                self._depth -= 1
            self._count(1)
            self._sizes[id(node)] = self._nodes - before
            return node

        def _count(self, n: int) -> None:
            self._nodes += n
            if self._nodes > MAX_NODES:
                raise _Exceeded(f"with its aliases expanded it stands for more than "
                                f"{MAX_NODES:,} values (an alias bomb?)")

    _LOADER = Bounded
    return Bounded


def private_key_exposed(path: str | os.PathLike[str]) -> str | None:
    """The mode, as ``0644``, when the file at ``path`` may be read or written by its group or
    others (ssh refuses such a private key; mlpipe does too); None when only its owner may."""
    try:
        mode = Path(path).stat().st_mode
    except OSError:
        return None
    return None if not mode & 0o077 else f"{stat.S_IMODE(mode):04o}"


def _refused(where: str, what: str, kind: str, hint: str) -> UsageError:
    return UsageError(f"{what} {where} is {kind}, not a regular file: mlpipe reads only "
                      f"regular files", hint=hint)


def _too_big(where: str, what: str, size: int, limit: int, hint: str) -> UsageError:
    return UsageError(f"{what} {where} is {size:,} bytes, more than the {limit:,} mlpipe reads",
                      hint=hint)


__all__ = ["KEY_BYTES", "MAX_BYTES", "MAX_DEPTH", "MAX_NODES", "load_yaml", "private_key_exposed",
           "read_bytes", "read_text"]
