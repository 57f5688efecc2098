"""Secret parameters (``Param[Secret]``): the value reaches the step, and only a keyed hash of
it is ever written down.

A secret is handed to the step process in memory (its environment, never ``request.json``);
the store, the evidence bundle, the step record, the step log and exports hold
``secret:hmac-sha256:<hex>``, an HMAC of the value under a key that each store keeps
(``Store.secret_key``). The same secret gives the same hash in one store, so a step given the
same secret is reused and one given another secret runs again, and whoever reads a bundle
cannot test guesses of the secret without the store's key. Pure: no I/O.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import os
from collections.abc import Mapping
from typing import Any, TextIO, cast

#: What a secret's value is recorded as: this prefix and the HMAC-SHA256 of the value.
HASH_PREFIX = "secret:hmac-sha256:"
#: The environment variable that carries a step's secret values into its process (JSON: name
#: -> value); the step runtime removes it before the body runs.
ENV = "MLPIPE_SECRETS"
#: Shorter values are not looked for in logs and messages (they would mask ordinary text).
MIN_REDACTED = 4


class Secret(str):
    """A secret parameter's value: a ``str`` whose ``repr`` never shows it, so a traceback's
    or a debugger's rendering of the step's arguments does not print it.

    Declare ``token: Param[Secret]``; the body gets the value as a ``Secret`` (use it as any
    ``str``). ``str(token)`` and f-strings give the value itself: what the body then writes is
    its own, though mlpipe masks the value in the step's log and failure message.

    Example:
        >>> token = Secret("s3cr3t-value")
        >>> token == "s3cr3t-value", repr(token)
        (True, "Secret('***')")
    """

    __slots__ = ()

    def __repr__(self) -> str:
        return "Secret('***')"


def keyed_hash(key: bytes, value: str) -> str:
    """What ``value`` is recorded as in a store whose secret key is ``key``.

    Example:
        >>> keyed_hash(b"k" * 32, "hunter2")[:27]
        'secret:hmac-sha256:f6c2ff60'
    """
    return HASH_PREFIX + hmac.new(key, value.encode("utf-8"), hashlib.sha256).hexdigest()


def is_keyed_hash(value: Any) -> bool:
    return isinstance(value, str) and value.startswith(HASH_PREFIX)


def take_from_environment() -> dict[str, Secret]:
    """The secret values the executor handed this step process, removed from ``os.environ``
    so that processes the body starts do not inherit them."""
    raw = os.environ.pop(ENV, None)
    if not raw:
        return {}
    return {name: Secret(value) for name, value in json.loads(raw).items()}


class Redactor:
    """Masks known secret values in text, in nested records and in a log file.

    Each value becomes ``[secret NAME]``; values shorter than ``MIN_REDACTED`` characters are
    left (masking them would garble ordinary text).

    Example:
        >>> Redactor({"token": "hunter22"}).text("bad token hunter22")
        'bad token [secret token]'
    """

    def __init__(self, values: Mapping[str, str]) -> None:
        # the longest first, so a secret that contains another is masked whole
        self.pairs = sorted(((str(v), f"[secret {k}]") for k, v in values.items()
                             if isinstance(v, str) and len(v) >= MIN_REDACTED),
                            key=lambda p: -len(p[0]))

    def __bool__(self) -> bool:
        return bool(self.pairs)

    def text(self, text: str) -> str:
        for value, mask in self.pairs:
            if value in text:
                text = text.replace(value, mask)
        return text

    def value(self, obj: Any) -> Any:
        """``obj`` with every string in it (keys included) masked."""
        if isinstance(obj, str):
            return self.text(obj)
        if isinstance(obj, dict):
            return {self.value(k): self.value(v) for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            return type(obj)(self.value(v) for v in obj)
        return obj

    def stream(self, stream: TextIO) -> TextIO:
        """``stream`` with the values masked in what is written through it: the step runtime
        wraps ``sys.stdout`` and ``sys.stderr`` so that the log holds no secret even while the
        step runs (a value split across two writes, or written by a child process, is masked
        when the step ends, by :meth:`file`)."""
        return stream if not self.pairs else cast(TextIO, _MaskedStream(stream, self))

    def file(self, path: str | os.PathLike[str]) -> bool:
        """Mask the values in the file at ``path`` (replaced whole); whether it held any."""
        try:
            with open(path, "rb") as fh:
                data = fh.read()
        except OSError:
            return False
        masked = data
        for value, mask in self.pairs:
            masked = masked.replace(value.encode("utf-8"), mask.encode("utf-8"))
        if masked == data:
            return False
        tmp = f"{os.fspath(path)}.redacting"
        with open(tmp, "wb") as fh:
            fh.write(masked)
        os.replace(tmp, path)
        return True


class _MaskedStream:
    """A text stream whose writes pass through a ``Redactor``; everything else is the wrapped
    stream's."""

    def __init__(self, stream: TextIO, redact: Redactor) -> None:
        self._stream, self._redact = stream, redact

    def write(self, text: str) -> int:
        self._stream.write(self._redact.text(text))
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)
