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


class ExportError(MlpipeError, ValueError):
    """A pipeline that cannot be written as Azure ML YAML (or YAML that cannot be read back)."""


class AzureError(MlpipeError, RuntimeError):
    """Azure ML cannot be reached or used: no workspace, no credentials, no network, a
    rejected request. The message says which, and how to provide it."""
