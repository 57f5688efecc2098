"""The exceptions mlpipe raises. Every error builds its message in one place from its fields.

Nothing here imports the rest of mlpipe.
"""
from __future__ import annotations


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
        if self.file is None:
            return None
        return f"{self.file}:{self.line}" if self.line else self.file

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
    """

    def __init__(self, reason: str, *, rank: int | None = None, returncode: int | None = None,
                 log_path: str | None = None, log_tail: str = "", hint: str | None = None) -> None:
        self.reason = reason
        self.rank = rank
        self.returncode = returncode
        self.log_path = log_path
        self.log_tail = log_tail
        message = reason
        if log_tail:
            body = "\n".join(f"    {line}" for line in log_tail.splitlines())
            message += f"\n  last lines of {log_path}:\n{body}"
        super().__init__(message, hint=hint)
