"""The exceptions mlpipe raises. Every error builds its message in one place from its fields.

Nothing here imports the rest of mlpipe but its path rendering.
"""
from __future__ import annotations

from mlpipe.paths import display_place


def with_article(word: str) -> str:
    """``an int``, ``a str``: for messages that name a type."""
    return f"an {word}" if word[:1].lower() in "aeiou" else f"a {word}"


class MlpipeError(Exception):
    """Base of every error mlpipe raises on purpose.

    Args:
        message: what is wrong, stated with the concrete values.
        hint: what to do about it, imperative; optional.
        file: the user's file the error concerns, where known.
        line: the line in that file, where known.
    """

    exit_code = 2

    def __init__(self, message: str, *, hint: str | None = None,
                 file: str | None = None, line: int | None = None) -> None:
        self.message = message
        self.hint = hint
        self.file = file
        self.line = line
        super().__init__(self.render())

    @property
    def where(self) -> str | None:
        """``file:line`` (or just ``file``) when a location is known."""
        return display_place(self.file, self.line)

    def render(self) -> str:
        """The whole text shown to a user: located message, then the hint."""
        text = f"{self.where}: {self.message}" if self.where else self.message
        if self.hint:
            text += f"\n  help: {self.hint}"
        return text


class DefinitionError(MlpipeError, TypeError):
    """A component or pipeline definition that cannot be turned into a spec."""


class LoadError(MlpipeError, ImportError):
    """A pipeline file that could not be loaded (syntax error, failed import, no pipeline)."""


class UsageError(MlpipeError, ValueError):
    """A command or API called with arguments that cannot work."""


class ContractError(MlpipeError, ValueError):
    """An artifact on disk that does not match its contract.

    ``file`` is the file at fault and ``line`` its row (1-based, header included) where one
    row is at fault; ``column`` and ``key`` name the column or key when one is. ``mismatch``
    names what differs where a contract says (a metrics report: ``missing``, ``value``,
    ``scope`` or ``population``), so a diagnosis reads it rather than the message.
    """

    exit_code = 1

    def __init__(self, message: str, *, hint: str | None = None, file: str | None = None,
                 line: int | None = None, column: str | None = None,
                 key: str | None = None, mismatch: str | None = None) -> None:
        self.column = column
        self.key = key
        self.mismatch = mismatch
        super().__init__(message, hint=hint, file=file, line=line)


class DistributedError(MlpipeError, RuntimeError):
    """A distributed step that could not be launched, did not coordinate, or misused a helper."""


class LaunchFailed(DistributedError):
    """A distributed launch that ended badly: one worker failed, hung, or never joined.

    Args:
        reason: what happened, stated with the rank and the numbers.
        rank: the global rank that failed (or the first one still hanging), where known.
        returncode: its exit status (negative: killed by that signal), where known.
        log_path: its log file.
        log_tail: the last lines of that log.
        kind: how the launch ended: ``exited`` (a worker exited non-zero), ``rendezvous`` (a
            worker never joined), ``timeout`` (the step's time ran out), ``start`` (a worker
            could not be started), ``refused`` (nothing started); None where not said.
    """

    def __init__(self, reason: str, *, rank: int | None = None, returncode: int | None = None,
                 log_path: str | None = None, log_tail: str = "", hint: str | None = None,
                 kind: str | None = None) -> None:
        self.reason = reason
        self.kind = kind
        self.rank = rank
        self.returncode = returncode
        self.log_path = log_path
        self.log_tail = log_tail
        message = reason
        if log_tail:
            body = "\n".join(f"    {line}" for line in log_tail.splitlines())
            message += f"\n  last lines of {log_path}:\n{body}"
        super().__init__(message, hint=hint)


class LaunchRefused(LaunchFailed):
    """A launch this machine cannot make as declared (more CUDA ranks than visible GPUs);
    refused before any process started."""

    def __init__(self, reason: str, *, hint: str | None = None, **kw) -> None:
        super().__init__(reason, hint=hint, kind="refused", **kw)


class StoreError(MlpipeError, RuntimeError):
    """The evidence store cannot be opened, migrated or written."""


class StepFailed(MlpipeError, RuntimeError):
    """A step of a run failed; the original exception is chained where there is one."""

    exit_code = 1


class EnvironmentBuildFailed(MlpipeError, RuntimeError):
    """A step's declared environment could not be built here (``submit --isolate``); nothing
    was run."""

    exit_code = 1


class ExportError(MlpipeError, ValueError):
    """A pipeline that cannot be written as Azure ML YAML (or YAML that cannot be read back)."""


class AzureError(MlpipeError, RuntimeError):
    """Azure ML cannot be reached or used: no workspace, no credentials, no network, a
    rejected request. The message says which, and how to provide it."""
