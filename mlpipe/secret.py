"""Secret parameters (``Param[Secret]``): the value reaches the step, and only a keyed hash of
it is ever written down.

A secret is handed to the step process in memory (its environment, never ``request.json``);
the store, the evidence bundle and the step record hold ``secret:hmac-sha256:<hex>``, an HMAC
of the value under a key that each store keeps (``Store.secret_key``), and logs and messages
show ``[secret NAME]`` (``Redactor``). The same secret gives the same hash in one store, so a
step given the same secret is reused and one given another secret runs again, and whoever
reads a bundle cannot test guesses of the secret without the store's key. No I/O but the log
file ``Redactor.file`` masks.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import os
from collections.abc import Mapping
from typing import Any

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
    return HASH_PREFIX + hmac.new(key, _encoded(value), hashlib.sha256).hexdigest()


def take_from_environment() -> dict[str, Secret]:
    """The secret values the executor handed this step process, removed from ``os.environ``
    so that processes the body starts do not inherit them."""
    raw = os.environ.pop(ENV, None)
    if not raw:
        return {}
    return {name: Secret(value) for name, value in json.loads(raw).items()}


def forms(value: str) -> list[str]:
    r"""``value`` as text shows it: itself, and as ``repr`` and JSON escape it (a traceback's
    ``KeyError('...')``, a dict printed, a JSON document), for a value with a newline, a quote, a
    backslash or a character those write as an escape.

    Example:
        >>> forms('a"b\n')
        ['a"b\n', 'a"b\\n', 'a\\"b\\n']
    """
    found = [value]
    plain = str.__str__(value)  # a Secret's own repr hides it: the str's is the one printed
    for form in (repr(plain)[1:-1], json.dumps(plain)[1:-1],
                 json.dumps(plain, ensure_ascii=False)[1:-1]):
        if form not in found:
            found.append(form)
    return found


class Redactor:
    """Masks known secret values in text, in a log file and in a stream of bytes; each value
    (and its escaped forms, ``forms``) becomes ``[secret NAME]``. Values shorter than
    ``MIN_REDACTED`` characters are left (masking them would garble ordinary text).

    Example:
        >>> Redactor({"token": "hunter22"}).text("bad token hunter22")
        'bad token [secret token]'
    """

    def __init__(self, values: Mapping[str, Any]) -> None:
        pairs = {}
        for name, value in values.items():
            if isinstance(value, str) and len(value) >= MIN_REDACTED:
                for form in forms(value):
                    pairs.setdefault(form, f"[secret {name}]")
        # the longest first, so a secret that contains another is masked whole
        self.pairs = sorted(pairs.items(), key=lambda p: -len(p[0]))
        self._bytes = [(_encoded(v), _encoded(m)) for v, m in self.pairs]

    def __bool__(self) -> bool:
        return bool(self.pairs)

    def text(self, text: str) -> str:
        for value, mask in self.pairs:
            if value in text:
                text = text.replace(value, mask)
        return text

    def data(self, data: bytes) -> bytes:
        """``data`` with every form of every value masked (the longest first)."""
        for value, mask in self._bytes:
            if value in data:
                data = data.replace(value, mask)
        return data

    def file(self, path: str | os.PathLike[str]) -> bool:
        """Mask the values in the file at ``path`` (replaced whole); whether it held any."""
        try:
            with open(path, "rb") as fh:
                data = fh.read()
        except OSError:
            return False
        masked = self.data(data)
        if masked == data:
            return False
        tmp = f"{os.fspath(path)}.redacting"
        with open(tmp, "wb") as fh:
            fh.write(masked)
        os.replace(tmp, path)
        return True

    def stream(self) -> StreamMask:
        return StreamMask(self)


class StreamMask:
    """Masks a stream of bytes that arrives in pieces: what ``feed`` returns can be written
    out at once; the end of a piece that may be the start of a value is held back until the
    next piece (or ``close``) says whether it is.

    Example:
        >>> mask = Redactor({"token": "hunter22"}).stream()
        >>> mask.feed(b"a hunt") + mask.feed(b"er22 b") + mask.close()
        b'a [secret token] b'
    """

    def __init__(self, redact: Redactor) -> None:
        self.redact = redact
        self.pending = b""

    def feed(self, chunk: bytes) -> bytes:
        data = self.pending + chunk
        cut = self._cut(data)
        self.pending = data[cut:]
        return self.redact.data(data[:cut])

    def close(self) -> bytes:
        data, self.pending = self.pending, b""
        return self.redact.data(data)

    def _cut(self, data: bytes) -> int:
        """Where ``data`` can be cut: before the first place from which its end could still
        grow into a value, and never inside a value that is whole in it."""
        cut = len(data)
        for value, _ in self.redact._bytes:
            first = value[:1]
            i = data.find(first, max(0, len(data) - len(value) + 1))
            while i != -1 and i < cut:
                if data.startswith(value[:len(data) - i], i):
                    cut = i
                    break
                i = data.find(first, i + 1)
        for value, _ in self.redact._bytes:
            i = data.find(value, max(0, cut - len(value) + 1), cut + len(value) - 1)
            if i != -1 and i < cut < i + len(value):
                end = i + len(value)
                return end + self._cut(data[end:])
        return cut


def _encoded(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def from_environment(given: Mapping[str, str]) -> dict[str, Secret]:
    """``--secret NAME=ENV_VAR``: each parameter's value read from its environment variable,
    which is then removed from this process's environment (read once: the steps and what
    they start do not inherit it).

    Raises:
        UsageError: what follows ``=`` is not a variable's name, or the variable is unset,
            empty or not UTF-8 text. What was typed is never repeated unless it reads as a
            conventional variable name: it may be the secret itself.

    Example:
        >>> from_environment({"token": "HUB_TOKEN"})  # doctest: +SKIP
        {'token': <Secret>}
    """
    import re

    from mlpipe.errors import UsageError

    found: dict[str, Secret] = {}
    for name, variable in given.items():
        variable = variable.strip()
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", variable):
            raise UsageError(f"--secret {name}=...: what follows '=' is not the name of an "
                             f"environment variable (letters, digits and _)",
                             hint=f"write --secret {name}=ENV_VAR, naming the variable that "
                                  f"holds the secret, not the secret")
        plain = re.fullmatch(r"[A-Z_][A-Z0-9_]*", variable) is not None
        shown, that = (f"the environment variable {variable}", variable) if plain else (
            "the environment variable it names", "that variable")
        value = os.environ.get(variable)
        if not value:
            raise UsageError(f"--secret {name}=...: {shown} is "
                             f"{'empty' if value == '' else 'not set'}",
                             hint=f"set {that} (from your secret store or your CI's secrets) "
                                  f"before submitting")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise UsageError(f"--secret {name}=...: {shown} holds bytes that are not UTF-8 "
                             f"text",
                             hint="give the secret as text (base64, say, for binary key "
                                  "material)") from None
        found[name] = Secret(value)
    for variable in {v.strip() for v in given.values()}:
        os.environ.pop(variable, None)
    return found
