"""What a function component's code upload holds: the modules its steps import, and the
``.amlignore`` beside the code root that tells azure-ai-ml to upload nothing else.

azure-ai-ml uploads a component's ``code`` folder whole, minus what the folder's
``.amlignore`` (else ``.gitignore``) excludes. The code root of a function component is the
folder its module is imported from, often the project itself: the evidence store, every
artifact, a virtual environment. The ``.amlignore`` written here is an allow list: every
top-level entry out, then back in only the top-level packages (whole: a module may open a
sibling file by path, as the example's serving code does) and modules that hold what the
components import (found by ``source.local_module_files``, without importing them; and those
an earlier compile from the same root let in, while they exist: its job files may still be
submitted), and, wherever they are, never the store, the artifacts, virtual environments or
caches. Knows files, not Azure ML's API: never
imports azure-ai-ml.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from mlpipe.evidence.storage.config import locate
from mlpipe.modules import module_file
from mlpipe.source import local_module_files
from mlpipe.spec import ComponentSpec

AMLIGNORE = ".amlignore"
#: The first line of an ``.amlignore`` mlpipe wrote; a file without it is the user's, kept.
MARK = "# mlpipe: this file is written by `mlpipe compile` and `mlpipe submit --target azure`"
#: Names never uploaded, at any depth (gitignore patterns).
NEVER = ("__pycache__/", "*.py[cod]", ".venv/", "venv/", ".git/", ".mypy_cache/",
         ".pytest_cache/", ".ruff_cache/", ".hypothesis/", ".ipynb_checkpoints/", ".tox/",
         ".nox/", "*.egg-info/", "mlruns/", "node_modules/", ".DS_Store")
_NEVER_DIRS = frozenset(p.rstrip("/") for p in NEVER if p.endswith("/") and "*" not in p)
#: A file this large left in the upload is named in a warning (MP850).
LARGE_FILE_BYTES = 10 * 1024 * 1024


@dataclass(slots=True)
class Upload:
    """The code upload of one code root: the module files the steps import (relative POSIX
    paths; their top-level packages are uploaded whole, as a module may open another by
    path), the top-level entries an earlier compile let in (``kept``), the folders never
    uploaded (the store, artifacts, virtual environments found there), and whether the root
    has the user's own ``.amlignore`` (then mlpipe writes none)."""

    root: Path
    modules: set[str] = field(default_factory=set)
    excluded: set[str] = field(default_factory=set)
    own_ignore: bool = False
    kept: set[str] = field(default_factory=set)

    def add_module(self, file: str | os.PathLike[str]) -> bool:
        """Keep ``file`` (a module a step imports); False when it lies outside the root."""
        try:
            rel = Path(file).resolve().relative_to(self.root)
        except ValueError:
            return False
        self.modules.add(rel.as_posix())
        for parent in rel.parents:  # a package's __init__ runs before its module
            init = self.root / parent / "__init__.py"
            if parent != Path(".") and init.is_file():
                self.modules.add((parent / "__init__.py").as_posix())
        return True

    def exclude(self, folder: str | os.PathLike[str]) -> None:
        """Never upload ``folder`` (the store, the artifacts) when it lies under the root."""
        try:
            rel = Path(folder).resolve().relative_to(self.root)
        except ValueError:
            return
        if rel != Path("."):
            self.excluded.add(rel.as_posix())

    def tops(self) -> list[str]:
        """The top-level entries uploaded: each imported module's top-level package (a
        folder, uploaded whole) or top-level module file."""
        return sorted({m.split("/", 1)[0] + ("/" if "/" in m else "") for m in self.modules}
                      | self.kept)

    def ignore_text(self) -> str | None:
        """The ``.amlignore`` mlpipe writes at the root, or None to keep the user's own."""
        if self.own_ignore:
            return None
        lines = [MARK,
                 "# Azure ML uploads this folder as the code of the pipeline's function "
                 "components;",
                 "# only the packages and modules they import go up.",
                 "/*"]
        lines.extend(f"!/{top}" for top in self.tops())
        lines.append("# never uploaded: the evidence store, artifacts, virtual environments, "
                     "caches")
        lines.extend(f"/{rel}/" for rel in sorted(self.excluded))
        lines.extend(NEVER)
        return "\n".join(lines) + "\n"

    def files(self) -> list[str]:
        """The files azure-ai-ml uploads with mlpipe's ``.amlignore`` (relative, sorted)."""
        out = set()
        excluded = {self.root / rel for rel in self.excluded}
        for top in self.tops():
            path = self.root / top
            if not top.endswith("/"):
                if path.is_file():
                    out.add(top)
                continue
            for file in _walk(path, excluded):
                if not _never_file(file.name):
                    out.add(file.relative_to(self.root).as_posix())
        return sorted(out)

    def large(self) -> list[tuple[str, int]]:
        """Files of the upload at least ``LARGE_FILE_BYTES`` long, largest first."""
        sized = [(rel, (self.root / rel).stat().st_size) for rel in self.files()]
        return sorted(((r, s) for r, s in sized if s >= LARGE_FILE_BYTES),
                      key=lambda item: (-item[1], item[0]))

    def write(self) -> Path | None:
        """Write the ``.amlignore`` (unless the root has the user's own); its path."""
        text = self.ignore_text()
        if text is None:
            return None
        path = self.root / AMLIGNORE
        if path.is_file() and path.read_text(encoding="utf-8", errors="replace") == text:
            return path
        path.write_text(text, encoding="utf-8")
        return path


def plan(root: str | os.PathLike[str], modules: Iterable[str | os.PathLike[str]],
         never: Iterable[str | os.PathLike[str]] = ()) -> Upload:
    """The upload of ``root`` for the given module files, never holding the ``never`` folders
    (nor any virtual environment found beside the modules).

    Example:
        >>> plan(".", ["components/defect.py", "components/images.py"]).files()
        ['components/__init__.py', 'components/defect.py', 'components/images.py']
    """
    up = Upload(Path(root).resolve())
    existing = up.root / AMLIGNORE
    if existing.is_file():
        lines = existing.read_text(encoding="utf-8", errors="replace").splitlines()
        up.own_ignore = not lines or lines[0].strip() != MARK
        if not up.own_ignore:
            # another pipeline's job files written from this root may still be submitted
            # with `az ml job create`: the modules it needs stay in while they exist
            for line in lines:
                entry = line[2:]
                if line.startswith("!/") and "/" not in entry.rstrip("/") and (
                        (up.root / entry).is_dir() if entry.endswith("/")
                        else (up.root / entry).is_file()):
                    up.kept.add(entry)
    for module in modules:
        up.add_module(module)
    for folder in never:
        up.exclude(folder)
    _drop_environments(up)
    return up


def _never_file(name: str) -> bool:
    return name == ".DS_Store" or name.endswith((".pyc", ".pyo", ".pyd"))


def _walk(folder: Path, excluded: set[Path]) -> Iterable[Path]:
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=True):
        here = Path(dirpath)
        dirnames[:] = [d for d in dirnames if d not in _NEVER_DIRS
                       and not d.endswith(".egg-info") and here / d not in excluded]
        for name in filenames:
            yield here / name




def add_component(uploads: dict[Path, Upload], root: Path, spec: ComponentSpec) -> None:
    """Record in ``uploads`` (by code root) the module files function component ``spec``
    needs: its module and, transitively, the local modules it imports."""
    resolved = Path(root).resolve()
    up = uploads.get(resolved)
    if up is None:
        up = uploads[resolved] = plan(resolved, (), _never_folders(resolved))
    module = (spec.function or "").partition(":")[0]
    file = module_file(module)[0] if module else None
    if not file:
        return
    up.add_module(file)
    for imported in sorted(local_module_files(file)):
        up.add_module(imported)
    _drop_environments(up)


def component_uploads(components: Iterable[ComponentSpec],
                      code_root: str | os.PathLike[str] | None,
                      root_of: Callable[[ComponentSpec], Path | None]) -> list[Upload]:
    """The upload of every code root of these function components (``code_root``, else
    each one's ``root_of``)."""
    uploads: dict[Path, Upload] = {}
    added: set[tuple[Path, str]] = set()  # a module's files, once per root (not once a step)
    seen: set[int] = set()  # the steps of one component share its spec
    for spec in components:
        if spec.function is None or spec.origin is not None or id(spec) in seen:
            continue
        seen.add(id(spec))
        root = Path(code_root) if code_root is not None else root_of(spec)
        if root is not None and (root, spec.function.partition(":")[0]) not in added:
            added.add((root, spec.function.partition(":")[0]))
            add_component(uploads, root, spec)
    return list(uploads.values())


def _never_folders(root: Path) -> list[Path]:
    """The evidence home and artifact roots of the project at ``root``: never uploaded."""
    where = locate(root)
    folders = [root / "evidence", where.home, where.artifacts]  # the default home, always
    if where.shared_artifacts and "://" not in where.shared_artifacts:
        folders.append(Path(where.shared_artifacts))
    return folders


def _drop_environments(up: Upload) -> None:
    for top in up.tops():
        if not top.endswith("/"):
            continue
        for dirpath, dirnames, _ in os.walk(up.root / top):
            for name in list(dirnames):
                here = Path(dirpath) / name
                if (here / "pyvenv.cfg").is_file() or (here / "conda-meta").is_dir():
                    up.exclude(here)
                    dirnames.remove(name)
                elif name in _NEVER_DIRS:
                    dirnames.remove(name)


__all__ = ["AMLIGNORE", "LARGE_FILE_BYTES", "MARK", "NEVER", "Upload", "add_component",
           "component_uploads", "plan"]
