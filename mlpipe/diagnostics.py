"""Diagnostics: the Code and Diagnostic values and their renderings.

Only the data model lives here: the table of published codes is ``mlpipe.codes``; the checks
that produce diagnostics live in ``mlpipe.checks``.
"""
from __future__ import annotations

import enum
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from mlpipe.errors import MlpipeError, UsageError
from mlpipe.paths import display_path, display_place


class Severity(str, enum.Enum):
    """How bad a diagnostic is: errors stop a run, warnings and info do not."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


_SEVERITY_ORDER = {Severity.ERROR: 0, Severity.WARNING: 1, Severity.INFO: 2}
_CODE_RE = re.compile(r"^MP\d{3}$")
_NAME_RE = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")


@dataclass(frozen=True, slots=True)
class Code:
    """One published diagnostic code. Codes are never reused once published.

    Args:
        code: ``MP`` and three digits.
        name: kebab-case name of the problem.
        severity: the default severity of diagnostics with this code.
        summary: one line, shown by ``mlpipe check --explain``.
    """

    code: str
    name: str
    severity: Severity
    summary: str

    def __post_init__(self) -> None:
        if not _CODE_RE.match(self.code):
            raise ValueError(f"diagnostic code {self.code!r} is not MP followed by three digits")
        if not _NAME_RE.match(self.name):
            raise ValueError(f"diagnostic name {self.name!r} is not kebab-case")


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """One problem found by a check.

    ``step``/``port`` locate a problem on one port; ``source``/``target`` (rendered as
    ``from``/``to``) locate a problem on an edge, as ``step.port`` strings.
    """

    code: str
    name: str
    severity: Severity
    message: str
    hint: str | None = None
    step: str | None = None
    port: str | None = None
    source: str | None = None
    target: str | None = None
    file: str | None = None
    line: int | None = None
    extra: tuple[tuple[str, object], ...] = field(default=())

    @classmethod
    def of(cls, code: Code, message: str, *, hint: str | None = None,
           severity: Severity | None = None, **where) -> "Diagnostic":
        """Build a diagnostic for a registered code."""
        return cls(code=code.code, name=code.name, severity=severity or code.severity,
                   message=message, hint=hint, **where)

    @property
    def where(self) -> str | None:
        return display_place(self.file, self.line)

    def to_json(self) -> dict:
        """The JSON object printed by ``mlpipe check --format json``."""
        return {
            "code": self.code,
            "name": self.name,
            "severity": self.severity.value,
            "step": self.step,
            "port": self.port,
            "from": self.source,
            "to": self.target,
            "file": None if self.file is None else display_path(self.file),
            "line": self.line,
            "message": self.message,
            "hint": self.hint,
        }

    def render(self) -> str:
        """The linter-style text form: header, location arrow, help line."""
        lines = [f"{self.severity.value}[{self.code}] {self.name}: {self.message}"]
        if self.where:
            lines.append(f"  --> {self.where}")
        if self.hint:
            lines.append(f"  help: {self.hint}")
        return "\n".join(lines)


class ChecksFailed(UsageError):
    """A backend was asked to run or submit a pipeline its checks find errors in; nothing was
    run, sent or recorded. ``diagnostics`` holds every diagnostic, errors and the rest.

    Args:
        diagnostics: what the checks reported.
        message: what was refused (the default names the count).
        hint: what to do; None for none.
    """

    exit_code = 1

    def __init__(self, diagnostics: list[Diagnostic], message: str | None = None, *,
                 hint: str | None = "fix them (mlpipe check shows them) and try again") -> None:
        self.diagnostics = list(diagnostics)
        errors = sum(1 for d in self.diagnostics if d.severity is Severity.ERROR)
        super().__init__(message or f"the pipeline has {errors} check error(s)", hint=hint)


class CodedRefusal(MlpipeError):
    """An action refused for a reason one published code names (exit 1: a problem with what
    it acts on, not with the command line). The message opens with ``[MPnnn name]``; ``code``
    keeps the code's string.

    Args:
        code: the published code of the reason.
        message: what is wrong, with the concrete values.
        hint: what to do about it.
    """

    exit_code = 1

    def __init__(self, code: Code, message: str, *, hint: str) -> None:
        self.code = code.code
        super().__init__(f"[{code.code} {code.name}] {message}", hint=hint)


#: What a refusal on check errors says, by what was refused: the one place of its wording
#: (``{errors}``: how many errors).
_REFUSALS: dict[str, tuple[str, str | None]] = {
    "run": ("the pipeline has check errors; nothing was run", None),
    "submit": ("the pipeline has {errors} error(s); nothing was submitted",
               "fix them (mlpipe check shows them) and submit again"),
    "write": ("nothing written; fix the errors above first", None),
}


def refuse_check_errors(diagnostics: Sequence[Diagnostic], refused: str) -> None:
    """The one refusal on check errors: ChecksFailed when ``diagnostics`` hold an error, so
    nothing is run, submitted or written.

    Args:
        diagnostics: every diagnostic the run or export would go ahead with (ignored codes
            already left out).
        refused: ``run``, ``submit`` or ``write``: what is refused.

    Raises:
        ChecksFailed: an error among ``diagnostics``.

    Example:
        >>> refuse_check_errors([], "run")   # nothing to refuse
    """
    if has_errors(diagnostics):
        errors = sum(1 for d in diagnostics if d.severity is Severity.ERROR)
        message, hint = _REFUSALS[refused]
        raise ChecksFailed(list(diagnostics), message.format(errors=errors), hint=hint)


def sort_key(d: Diagnostic) -> tuple:
    return (_SEVERITY_ORDER[d.severity], d.file or "", d.line or 0, d.code, d.message)


def has_errors(diagnostics: Iterable[Diagnostic]) -> bool:
    return any(d.severity is Severity.ERROR for d in diagnostics)


def summary_line(diagnostics: list[Diagnostic]) -> str:
    """The closing count, e.g. ``Found 3 problems (2 errors, 1 warning, 0 info).``"""
    if not diagnostics:
        return "No problems found."
    counts = dict.fromkeys(Severity, 0)
    for d in diagnostics:
        counts[d.severity] += 1
    n = len(diagnostics)

    def plural(k: int, word: str) -> str:
        return f"{k} {word}" + ("" if k == 1 or word == "info" else "s")

    return (f"Found {plural(n, 'problem')} ({plural(counts[Severity.ERROR], 'error')}, "
            f"{plural(counts[Severity.WARNING], 'warning')}, {counts[Severity.INFO]} info).")


def render_text(diagnostics: list[Diagnostic]) -> str:
    """All diagnostics, most severe first, blank-line separated, then the count."""
    ordered = sorted(diagnostics, key=sort_key)
    parts = [d.render() for d in ordered]
    parts.append(summary_line(ordered))
    return "\n\n".join(parts)


def render_json(diagnostics: list[Diagnostic]) -> str:
    return json.dumps([d.to_json() for d in sorted(diagnostics, key=sort_key)], indent=2)
