"""Writing an export so that a failure leaves nothing behind: every file is written to a
staging folder beside the output folder, checked there (azure-ai-ml's validation), and only
then moved into place.

The staging folder is a sibling of the output folder, so every relative path the export
computed for the output folder (``code: ../src``, a conda file) resolves to the same place
from it while it is checked. Never imports azure-ai-ml.
"""
from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable
from pathlib import Path

from mlpipe.backends.azure.export import Export
from mlpipe.errors import MlpipeError
from mlpipe.writing import staging_beside


def write_staged(export: Export, out_dir: str | os.PathLike[str],
                 check: Callable[[Path], object] | None = None) -> list[Path]:
    """Write ``export`` under ``out_dir``, the job file first; ``check(staging_folder)`` runs
    on the written files before any reaches ``out_dir``. If it raises (or writing fails),
    ``out_dir`` is as it was (folders this call created are removed) and the error goes on.

    Example:
        >>> write_staged(export, "build", check=lambda folder: validate_export(folder))
        [PosixPath('build/job.yml')]
    """
    out = Path(out_dir).absolute()
    created = _first_missing(out)
    staging = staging_beside(out, str(out_dir))
    try:
        written = export.write(staging)
        if check is not None:
            check(staging)
        placed = []
        for path in written:
            dest = out / path.relative_to(staging)
            dest.parent.mkdir(parents=True, exist_ok=True)
            os.replace(path, dest)
            placed.append(Path(out_dir) / path.relative_to(staging))
        return placed
    except MlpipeError as err:
        _undo(created)
        # the staging folder is gone: name the file as it would have been written
        err.message = err.message.replace(str(staging), str(out_dir))
        if err.file is not None:
            err.file = err.file.replace(str(staging), str(out_dir))
        err.args = (err.render(),)
        raise
    except BaseException:
        _undo(created)
        raise
    finally:
        with contextlib.suppress(OSError):
            shutil.rmtree(staging)


def _undo(created: Path | None) -> None:
    if created is not None:
        shutil.rmtree(created, ignore_errors=True)


def _first_missing(path: Path) -> Path | None:
    """The outermost folder of ``path`` that does not exist yet (what a failure removes)."""
    missing = None
    for folder in (path, *path.parents):
        if folder.exists():
            break
        missing = folder
    return missing


__all__ = ["write_staged"]
