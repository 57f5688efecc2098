"""Watching a step body's file access: which files it read outside its declared inputs, and
which files it wrote under each output (and elsewhere), through ``sys.addaudithook``.

The hook sees what Python opens (``open``, ``os.open``, ``io.open_code``), renames, copies and
links, in every thread and in processes the rank forks; it does not see I/O done in native code
(``torch.save(obj, "path")``, Arrow's file system), which the finisher's walk of the outputs
attributes instead (``mlpipe.runtime.finish``). What is ignored, and why, is ``Filter``'s job
(docs/step-record.md, "Observation"). Imports nothing above the runtime's record.
"""
from __future__ import annotations

import os
import site
import sys
import sysconfig
import tempfile
import threading
from collections.abc import Iterable
from typing import Any, NamedTuple

#: Set to "0" to switch observation off (the record then says reads and writes are unknown).
OBSERVE_ENV = "MLPIPE_OBSERVE"
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
_CODE_SUFFIXES = (".py", ".pyc", ".pyo", ".pyd", ".so", ".pth", ".pyi")
#: The operating system's own folders: libraries, configuration, devices, kernel views.
SYSTEM_PREFIXES = ("/proc/", "/sys/", "/dev/", "/run/", "/usr/", "/lib/", "/lib32/",
                   "/lib64/", "/libx32/", "/bin/", "/sbin/", "/etc/", "/var/lib/",
                   "/var/cache/", "/snap/")
#: Caches that libraries keep for themselves (fonts, compiled kernels): never step data.
_TOOL_CACHES = (".cache/matplotlib", ".config/matplotlib", ".cache/fontconfig",
                ".nv/ComputeCache", ".triton", ".cache/torch/kernels", ".cache/torch_extensions")
_METADATA = ".egg-info/"
#: Most distinct paths one process keeps per kind; past it the record says how many it lost.
MAX_PATHS = 10_000


def enabled() -> bool:
    return os.environ.get(OBSERVE_ENV, "1") != "0"


def _prefix(path: str | None) -> str | None:
    if not path:
        return None
    path = os.path.abspath(path)
    return path if path.endswith(os.sep) else path + os.sep


def _prefixes(paths: Iterable[str | None]) -> tuple[str, ...]:
    found = {p for p in (_prefix(x) for x in paths) if p}
    # the longest first, so the most specific folder names a path
    return tuple(sorted(found, key=len, reverse=True))


_INTERPRETER_DIRS: list[str] | None = None


def _interpreter_dirs() -> list[str]:
    """The interpreter's own folders (prefixes, sysconfig's paths, site-packages): fixed for
    the life of the process, so worked out once (sysconfig takes milliseconds; the fork server
    works them out before it forks the steps, ``preload``)."""
    global _INTERPRETER_DIRS
    if _INTERPRETER_DIRS is None:
        dirs = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix]
        for key in ("stdlib", "platstdlib", "purelib", "platlib", "include", "platinclude",
                    "scripts", "data"):
            try:
                dirs.append(sysconfig.get_path(key))
            except KeyError:
                continue
        try:
            dirs += site.getsitepackages()
        except AttributeError:  # some virtualenvs' site module
            pass
        user = getattr(site, "USER_SITE", None)
        if user:
            dirs.append(user)
        _INTERPRETER_DIRS = dirs
    return list(_INTERPRETER_DIRS)


def _python_dirs() -> list[str]:
    dirs = _interpreter_dirs()
    dirs += [p for p in sys.path if p and ("site-packages" in p or "dist-packages" in p)]
    return [d for d in dirs if d and d != os.sep and os.path.abspath(d) != os.sep]


def preload() -> None:
    """Work out now what observing a step needs (for the fork server, before it forks): the
    interpreter's folders, and the temporary folder (``tempfile`` finds it by writing a file
    in each candidate, about 3 ms a step when each forked step does it again), and the paths
    ignored whatever the step."""
    _interpreter_dirs()
    tempfile.gettempdir()
    _process_paths()


class _ProcessPaths(NamedTuple):
    ignored: tuple[str, ...]   # the interpreter's, the libraries' caches, mlpipe's own
    code_dirs: tuple[str, ...]
    path_entries: frozenset[str]


_PROCESS_PATHS: tuple[tuple[Any, ...], _ProcessPaths] | None = None


def _process_paths() -> _ProcessPaths:
    """What ``Filter`` ignores whatever the step: worked out once per working folder,
    ``sys.path``, home and cache variables (relative entries are the working folder's; a forked
    step inherits the fork server's answer; about 60 ``abspath`` calls)."""
    global _PROCESS_PATHS
    key = (os.getcwd(), tuple(sys.path), os.environ.get("HOME"),
           os.environ.get("MPLCONFIGDIR"), os.environ.get("TRITON_CACHE_DIR"))
    if _PROCESS_PATHS is not None and _PROCESS_PATHS[0] == key:
        return _PROCESS_PATHS[1]
    home = os.path.expanduser("~")
    caches = [os.path.join(home, c) for c in _TOOL_CACHES]
    caches += [os.environ.get("MPLCONFIGDIR"), os.environ.get("TRITON_CACHE_DIR")]
    found = _ProcessPaths(
        _prefixes([*_python_dirs(), *caches,
                   os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]),
        _prefixes(p for p in sys.path if p),
        frozenset(os.path.abspath(p) for p in sys.path if p))
    _PROCESS_PATHS = (key, found)
    return found


class Filter:
    """Which paths are the step's business: declared inputs, outputs, the record, and what
    is neither code, the interpreter's, the system's nor a library's own cache.

    Args:
        inputs: input port -> path.
        outputs: output port -> path.
        scratch: folders the step may use freely (the record folder, the executor's scratch).
    """

    def __init__(self, inputs: dict[str, str], outputs: dict[str, str],
                 scratch: Iterable[str | None] = ()) -> None:
        self.inputs = _prefixes(inputs.values())
        self.input_files = {os.path.abspath(p) for p in inputs.values() if p}
        # the longest first, so a nested input names the path
        self.input_ports = sorted(((os.path.abspath(p), port) for port, p in inputs.items()
                                   if p), key=lambda x: len(x[0]), reverse=True)
        self.outputs = {port: os.path.abspath(path) for port, path in outputs.items() if path}
        self.output_prefixes = sorted(((p + os.sep if not p.endswith(os.sep) else p, port)
                                       for port, p in self.outputs.items()),
                                      key=lambda x: len(x[0]), reverse=True)
        fixed = _process_paths()
        self.ignored = tuple(sorted({*_prefixes(scratch), *fixed.ignored}, key=len,
                                    reverse=True))
        # compiled-kernel caches are named by prefix (``/tmp/torchinductor_<user>``)
        self.ignored_raw = SYSTEM_PREFIXES + (
            os.path.join(tempfile.gettempdir(), "torchinductor_"),)
        self.code_dirs = fixed.code_dirs
        self.path_entries = fixed.path_entries

    def output_of(self, path: str) -> tuple[str, str] | None:
        """``(port, path relative to the output)`` when ``path`` is (under) an output."""
        for prefix, port in self.output_prefixes:
            if path.startswith(prefix):
                return port, path[len(prefix):]
            if path == prefix[:-1]:
                return port, os.path.basename(path)
        return None

    def is_input(self, path: str) -> bool:
        return path in self.input_files or path.startswith(self.inputs)

    def input_of(self, path: str) -> tuple[str, str] | None:
        """``(port, path relative to the input)`` when ``path`` is (under) a declared input;
        a file input's own file is its base name."""
        for root, port in self.input_ports:
            if path == root:
                return port, os.path.basename(path)
            if path.startswith(root + os.sep):
                return port, path[len(root) + 1:]
        return None

    def is_ignored(self, path: str) -> bool:
        """System, interpreter, library caches, scratch, or code imported from ``sys.path``."""
        if path.startswith(self.ignored_raw + self.ignored):
            return True
        if path in self.path_entries:  # the import system probing a sys.path entry
            return True
        if path.endswith(_CODE_SUFFIXES) or "/__pycache__/" in path or _METADATA in path \
                or ".dist-info/" in path:
            # code, and the metadata of installed distributions (importlib.metadata)
            return path.startswith(self.code_dirs + self.ignored)
        return False


class Observer:
    """The file access of one process while a step body runs.

    ``start()`` begins watching (the audit hook is added once per process and is inert while
    no observer is active); ``stop()`` ends it; ``result()`` is what the record keeps.
    """

    def __init__(self, flt: Filter) -> None:
        self.filter = flt
        self.reads: set[str] = set()
        self.input_reads: dict[str, set[str]] = {port: set() for _, port in flt.input_ports}
        self.input_seen: set[str] = set()
        self.writes: dict[str, set[str]] = {port: set() for port in flt.outputs}
        self.elsewhere: set[str] = set()
        self.created: set[str] = set()
        self.lost = 0
        self.events = 0
        self._local = threading.local()

    # --- events ---------------------------------------------------------------------------

    def on_event(self, event: str, args: tuple[Any, ...]) -> None:
        if getattr(self._local, "busy", False):
            return
        self._local.busy = True
        try:
            if event == "open":
                self._open(args)
            elif event == "os.rename" or event in ("os.link", "os.symlink"):
                self._wrote(args[1])
            elif event == "shutil.copyfile":
                self._read(args[0])
                self._wrote(args[1])
            elif event == "os.truncate":
                self._wrote(args[0])
        except Exception:  # never let observation break the step
            pass
        finally:
            self._local.busy = False

    def _open(self, args: tuple[Any, ...]) -> None:
        path, mode, flags = (tuple(args) + (None, None))[:3]
        if isinstance(flags, int):
            write = bool(flags & _WRITE_FLAGS)
        elif isinstance(mode, str):
            write = any(c in mode for c in "wax+")
        else:
            write = False
        if write:
            self._wrote(path)
        else:
            self._read(path)

    def _norm(self, path: Any) -> str | None:
        if isinstance(path, int) or path is None:
            return None
        try:
            path = os.fspath(path)
        except TypeError:
            return None
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        return os.path.abspath(path)

    def _read(self, raw: Any) -> None:
        path = self._norm(raw)
        if path is None or path in self.reads or path in self.created:
            return
        self.events += 1
        flt = self.filter
        if flt.is_input(path):
            if path not in self.input_seen:   # each path looked at once (a stat for folders)
                self.input_seen.add(path)
                hit = flt.input_of(path)
                if hit is not None and not os.path.isdir(path):
                    self._add(self.input_reads[hit[0]], hit[1])
            return
        if flt.output_of(path) is not None or flt.is_ignored(path):
            return
        if os.path.isdir(path):
            return
        self._add(self.reads, path)

    def _wrote(self, raw: Any) -> None:
        path = self._norm(raw)
        if path is None:
            return
        self.events += 1
        self.created.add(path)
        hit = self.filter.output_of(path)
        if hit is not None:
            self._add(self.writes[hit[0]], hit[1])
        elif not self.filter.is_ignored(path) and not path.startswith(
                tempfile.gettempdir() + os.sep):
            self._add(self.elsewhere, path)

    def _add(self, target: set[str], value: str) -> None:
        if len(target) >= MAX_PATHS:
            self.lost += 1
            return
        target.add(value)

    # --- lifecycle ------------------------------------------------------------------------

    def start(self) -> None:
        global _ACTIVE
        _install()
        _ACTIVE = self

    def stop(self) -> None:
        global _ACTIVE
        if _ACTIVE is self:
            _ACTIVE = None

    def result(self) -> dict[str, Any]:
        """``reads_outside_inputs``, ``reads_inputs`` (input port -> the relative paths of the
        files opened under it), ``writes`` (port -> relative paths), ``writes_elsewhere`` and
        how the observation went."""
        return {"reads_outside_inputs": sorted(self.reads),
                "reads_inputs": {port: sorted(files)
                                 for port, files in sorted(self.input_reads.items())},
                "writes": {port: sorted(files) for port, files in sorted(self.writes.items())},
                "writes_elsewhere": sorted(self.elsewhere),
                "observation": {"enabled": True, "method": "sys.addaudithook",
                                "events": self.events, "paths_lost": self.lost,
                                "sees_native_io": False}}


_ACTIVE: Observer | None = None
_INSTALLED = False
_EVENTS = frozenset({"open", "os.rename", "os.link", "os.symlink", "shutil.copyfile",
                     "os.truncate"})


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if event in _EVENTS:
        observer = _ACTIVE
        if observer is not None:
            observer.on_event(event, args)


def _install() -> None:
    global _INSTALLED
    if not _INSTALLED:
        sys.addaudithook(_hook)  # permanent for the process; inert while _ACTIVE is None
        os.register_at_fork(after_in_child=_forked)
        _INSTALLED = True


def _forked() -> None:
    """In a process the rank forked (a DataLoader worker): watch on, from a clean slate, and
    leave what was seen in the child's part of the record when the process ends."""
    observer = _ACTIVE
    if observer is None:
        return
    observer.reads = set()
    observer.input_reads = {port: set() for port in observer.input_reads}
    observer.input_seen = set()
    observer.writes = {port: set() for port in observer.writes}
    observer.elsewhere = set()
    observer.events = observer.lost = 0
    observer._local = threading.local()

    def save() -> None:
        from mlpipe.runtime import record

        seen = observer.result()
        if not (seen["reads_outside_inputs"] or seen["writes_elsewhere"]
                or any(seen["writes"].values()) or any(seen["reads_inputs"].values())):
            return
        part = record.current()
        if part is not None and part.parent is not None:
            part.update(**seen)

    import atexit
    atexit.register(save)
    util = sys.modules.get("multiprocessing.util")
    if util is not None:
        # a multiprocessing worker clears its finalizers as it starts, runs its after-fork
        # callbacks, and leaves through os._exit after the finalizers registered then
        util.register_after_fork(observer, lambda obs: util.Finalize(obs, save,
                                                                     exitpriority=101))


def active() -> Observer | None:
    """The observer now watching this process, if any."""
    return _ACTIVE


def unobserved(why: str) -> dict[str, Any]:
    """What the record keeps when nothing was observed: unknown (null), never empty."""
    return {"reads_outside_inputs": None, "reads_inputs": None, "writes": None,
            "writes_elsewhere": None, "observation": {"enabled": False, "why_not": why}}


__all__ = ["OBSERVE_ENV", "Filter", "Observer", "active", "enabled", "unobserved"]
