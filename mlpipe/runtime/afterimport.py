"""Patching a module as soon as it has been imported: a ``sys.meta_path`` finder that wraps the
loader of the modules it is told about, so that a hook goes in when a step body imports the
module only after the watching began (the data loaders' watch, the rank-level trace). Imports
nothing of mlpipe.
"""
from __future__ import annotations

import importlib.abc
import importlib.util
from collections.abc import Callable
from types import ModuleType
from typing import Any


class AfterImport(importlib.abc.MetaPathFinder):
    """Calls ``patch(name, module)`` right after a module ``wanted(name)`` accepts has been
    executed; a patch that raises leaves that module unpatched (a library of another version)
    and never breaks the import."""

    def __init__(self, wanted: Callable[[str], bool],
                 patch: Callable[[str, ModuleType], None]) -> None:
        self.wanted, self.patch = wanted, patch
        self.busy = False

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if self.busy or not self.wanted(fullname):
            return None
        self.busy = True
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            self.busy = False
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return None
        original = loader.exec_module
        patch = self.patch

        def exec_module(module: ModuleType) -> None:
            original(module)
            try:
                patch(fullname, module)
            except Exception:
                pass

        loader.exec_module = exec_module
        return spec
