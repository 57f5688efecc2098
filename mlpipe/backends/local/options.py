"""What a local ``submit``'s options mean together, checked before anything is loaded or run:
the ``--local-scale`` sizes, a parameter given by both ``--param`` and ``--secret``, the flags
that apply to Azure ML only. The CLI parses the flags and hands them here.
"""
from __future__ import annotations

import re
from typing import Any

from mlpipe.errors import UsageError


def check_local(azure_flags: list[str]) -> None:
    """A local run given Azure-only flags (named as typed, e.g. ``--workspace``) is refused."""
    if azure_flags:
        raise UsageError(f"{', '.join(sorted(azure_flags))} apply to --target azure only",
                         hint="add --target azure, or drop them to run here")


def local_params(params: dict[str, str], secrets: dict[str, Any]) -> dict[str, Any]:
    """``--param`` values and ``--secret`` values together; a name given by both is refused."""
    twice = sorted(set(params) & set(secrets))
    if twice:
        raise UsageError(f"{twice[0]!r} is given both by --param and by --secret",
                         hint=f"give it once, with --secret {twice[0]}=ENV_VAR")
    return {**params, **secrets}


def local_scales(given: dict[str, str]) -> dict[str, tuple[int, int] | str]:
    """``--local-scale STEP=NODESxPROCS`` (or ``STEP=fit``): each step's launched size.

    Example:
        >>> local_scales({"train": "2x2", "eval": "fit"})
        {'train': (2, 2), 'eval': 'fit'}
    """
    found: dict[str, tuple[int, int] | str] = {}
    for step, size in given.items():
        if size.strip() == "fit":
            found[step] = "fit"
            continue
        match = re.fullmatch(r"(\d+)x(\d+)", size.strip())
        if match is None:
            raise UsageError(f"--local-scale {step}={size} is not NODESxPROCESSES or fit",
                             hint=f"write it as {step}=2x2 (2 nodes of 2 processes), or "
                                  f"{step}=fit")
        found[step] = (int(match.group(1)), int(match.group(2)))
    return found
