"""Writing a folder whole, through a staging folder beside it: a failure leaves no half of it.

The new content goes first into the staging folder and only then is moved into place. Knows no
export or bundle: its callers fill the folder and move it.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

from mlpipe.errors import UsageError


def staging_beside(target: Path, shown: str) -> Path:
    """A new, empty folder beside ``target`` (a sibling, so every relative path computed for
    ``target`` resolves to the same place from it), its parent made where missing.

    Args:
        target: the folder the content is for.
        shown: what the error names as not writable (``build``, ``the export to PATH``).

    Raises:
        UsageError: ``cannot write SHOWN: why``, where the folder cannot be made.

    Example:
        >>> staging_beside(Path("build"), "build").name.startswith(".build.staging-")
        True
    """
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=f".{target.name}.staging-", dir=target.parent))
    except OSError as exc:
        raise UsageError(f"cannot write {shown}: {exc.strerror or exc}",
                         hint="choose a folder you can write to") from None
