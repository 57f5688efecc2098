"""The user's own modules are imported from their source, never from a cached ``.pyc``.

mlpipe digests a step's code from the source files of the user's project (``mlpipe.source``).
Python, by default, runs a module's ``__pycache__`` bytecode while the source's mtime (in whole
seconds) and size match the ones the bytecode was compiled from: a file rewritten within the
same second at the same size (a script that edits a constant, then submits) runs its old code
while the digest names the new source, so the record would name code that did not run. Here a
*local* file (not the standard library, not an installed package, not mlpipe) is compiled from
its source at every import and no bytecode is read or written for it; everything else imports
as usual. ``install()`` is called where the user's code is imported: loading a pipeline file,
the step runtime, the fork server.
"""
from __future__ import annotations

import os
import sys
import sysconfig
from importlib.abc import PathEntryFinder
from importlib.machinery import (
    BYTECODE_SUFFIXES,
    EXTENSION_SUFFIXES,
    SOURCE_SUFFIXES,
    ExtensionFileLoader,
    FileFinder,
    SourceFileLoader,
    SourcelessFileLoader,
)
from types import CodeType

_MLPIPE_DIR = os.path.dirname(os.path.abspath(__file__))
#: Folders whose files are not the user's: the standard library, installed packages, mlpipe.
NOT_LOCAL = tuple(
    os.path.realpath(p) + os.sep
    for p in {sysconfig.get_path("stdlib"), sysconfig.get_path("platstdlib"),
              sysconfig.get_path("purelib"), sysconfig.get_path("platlib"), _MLPIPE_DIR}
    if p
)


def is_local(path: str) -> bool:
    """Whether ``path`` (a file or a folder) lies outside the standard library, the installed
    packages and mlpipe: the user's project."""
    real = os.path.realpath(path)
    return not (real + os.sep).startswith(NOT_LOCAL)


class SourceLoader(SourceFileLoader):
    """Compiles a local module from its source file on every import: no bytecode read or
    written. A file that is not local (mlpipe's own package, found in a local folder where it
    is installed in place) loads as usual."""

    def get_code(self, fullname: str) -> CodeType | None:
        path = self.get_filename(fullname)
        if not is_local(path):
            return super().get_code(fullname)
        return self.source_to_code(self.get_data(path), path)


_LOADERS = [(ExtensionFileLoader, EXTENSION_SUFFIXES), (SourceLoader, SOURCE_SUFFIXES),
            (SourcelessFileLoader, BYTECODE_SUFFIXES)]
_LOCAL_FINDER = FileFinder.path_hook(*_LOADERS)


def _local_folders(entry: str) -> PathEntryFinder:
    """The path hook: a finder that loads sources fresh, for a local folder only (ImportError
    hands any other entry to the next hook, Python's own)."""
    folder = entry or os.getcwd()
    if not os.path.isdir(folder) or not is_local(folder):
        raise ImportError("not a local folder")
    return _LOCAL_FINDER(entry)


def install() -> None:
    """From now on, modules of local folders import from their source (idempotent). Finders
    already cached for local folders are dropped so that the hook answers for them too."""
    if _local_folders in sys.path_hooks:
        return
    sys.path_hooks.insert(0, _local_folders)
    for entry, finder in list(sys.path_importer_cache.items()):
        if finder is None or isinstance(finder, FileFinder):
            folder = entry or os.getcwd()
            if os.path.isdir(folder) and is_local(folder):
                del sys.path_importer_cache[entry]
