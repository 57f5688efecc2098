"""Where a module's file is, found without importing it or any package above it.

``importlib.util.find_spec("torch.distributed")`` imports ``torch`` to learn its ``__path__``:
seconds, and a library a step body needs where the step runs, not where it is checked. Here
the top-level name is found by the import system's finders (which import nothing for a
top-level name) and each part below it by the path finder in the folders above it.
"""
from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys


def module_file(name: str) -> tuple[str | None, bool]:
    """The file of module ``name`` and whether it is a package, without importing anything.

    Returns:
        ``(None, False)`` when no such module can be found here (or its imports are blocked:
        ``sys.modules[name] is None``); else ``(file, is_package)``, where ``file`` is ``""``
        for a module without a file (a namespace package, a built-in module). A module already
        imported is answered from ``sys.modules``. A package whose ``__init__`` rewrites its
        own ``__path__`` at import time is looked into as it lies on disk.

    Example:
        >>> module_file("json.decoder")[0].endswith("json/decoder.py")
        True
        >>> module_file("torch.distributed")[1]  # torch installed, and still not imported
        True
    """
    if name in sys.modules:
        return _loaded(name)
    top, _, rest = name.partition(".")
    if top in sys.modules:
        found = _loaded(top)
        if found[0] is None:
            return found
        paths = list(getattr(sys.modules[top], "__path__", None) or [])
    else:
        try:
            spec = importlib.util.find_spec(top)  # a top-level name: nothing is imported
        except (ImportError, ValueError):
            return None, False
        if spec is None:
            return None, False
        found = (_origin(spec), spec.submodule_search_locations is not None)
        paths = list(spec.submodule_search_locations or [])
    prefix = top
    for part in rest.split(".") if rest else ():
        prefix = f"{prefix}.{part}"
        if prefix in sys.modules:
            found = _loaded(prefix)
            if found[0] is None:
                return found
            paths = list(getattr(sys.modules[prefix], "__path__", None) or [])
            continue
        if not paths:
            return None, False  # the parent is no package: nothing lies below it
        try:
            spec = importlib.machinery.PathFinder.find_spec(prefix, paths)
        except KeyError:
            # A namespace package (azure.ai) below one not imported yet (azure): the finder's
            # _NamespacePath looks its parent up in sys.modules. Its portions are the folders
            # of that name on the parent's path, which is all a namespace package is.
            paths = [os.path.join(p, part) for p in paths if os.path.isdir(os.path.join(p, part))]
            found = ("", True)
            if not paths:
                return None, False
            continue
        except (ImportError, ValueError):
            spec = None
        if spec is None:
            return None, False
        found = (_origin(spec), spec.submodule_search_locations is not None)
        paths = list(spec.submodule_search_locations or [])
    return found


def _loaded(name: str) -> tuple[str | None, bool]:
    module = sys.modules[name]
    if module is None:
        return None, False
    return getattr(module, "__file__", None) or "", getattr(module, "__path__", None) is not None


def _origin(spec: importlib.machinery.ModuleSpec) -> str:
    return spec.origin if spec.has_location and spec.origin else ""


__all__ = ["module_file"]
