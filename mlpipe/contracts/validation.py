"""Run-time validation: does the artifact at a path match its contract?

Used by the local executor on every output whose port has a contract, and by
``mlpipe validate``. Raises ContractError; never writes anything.
"""
from __future__ import annotations

import os
from pathlib import Path

from mlpipe.contracts.base import Contract, as_instance, is_contract, not_utf8
from mlpipe.errors import ContractError, UsageError


def validate(contract: Contract | type[Contract], path: str | os.PathLike) -> None:
    """Check the artifact at ``path`` against ``contract`` (a contract class or instance).

    Args:
        contract: what the artifact must mean; a class checks only its kind's form.
        path: the file or folder to check.

    Raises:
        ContractError: the artifact does not match; the error names the file, the row,
            column or key at fault, and what the contract expected.
        UsageError: ``contract`` is not a contract, or a library the check needs is missing.

    Example:
        >>> validate(LabelMap("defect-labels", classes=["ok", "scratch"]), "out/labels.json")
    """
    if not is_contract(contract):
        raise UsageError(f"{contract!r} is not a contract",
                         hint="pass a contract class or instance from mlpipe.contracts")
    instance = as_instance(contract)
    try:
        instance.validate(Path(path))
    except UnicodeDecodeError:  # a contract of the user's own that reads text as UTF-8
        if Path(path).is_file():
            raise not_utf8(instance.label, Path(path)) from None
        raise ContractError(f"a file under it is not UTF-8 text; {instance.label} reads it as "
                            f"UTF-8", hint="save the folder's text files as UTF-8",
                            file=str(path)) from None
    except OSError as exc:
        raise ContractError(f"cannot be read: {exc.strerror or exc}",
                            hint="check the path and its permissions",
                            file=str(exc.filename or path)) from None
