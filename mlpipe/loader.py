"""Loading a pipeline from a user's file: ``FILE.py``, ``FILE.py:function`` or ``pipeline.yml``.

Every failure becomes a LoadError (or the DefinitionError the user's code raised) that names
the file and line; nothing from inside mlpipe reaches the user as a bare traceback.
"""
from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os
import sys
import traceback

from mlpipe import localimport
from mlpipe.diagnostics import Diagnostic
from mlpipe.dsl import Pipeline
from mlpipe.errors import LoadError, MlpipeError
from mlpipe.paths import display_path
from mlpipe.spec import PipelineSpec

_MLPIPE_DIR = os.path.dirname(os.path.abspath(__file__))


def split_target(target: str) -> tuple[str, str | None]:
    """``"pipelines/x.py:fn"`` -> ``("pipelines/x.py", "fn")``."""
    path, sep, func = target.rpartition(":")
    if sep and func.isidentifier() and path:
        return path, func
    return target, None


def _module_name(path: str) -> tuple[str, str]:
    """The dotted name to import ``path`` under, and the sys.path root it needs."""
    cwd = os.getcwd()
    rel = os.path.relpath(path, cwd)
    parts = rel[:-3].split(os.sep)
    if not rel.startswith(os.pardir) and all(p.isidentifier() for p in parts):
        return ".".join(parts), cwd
    return os.path.basename(path)[:-3], os.path.dirname(path)


def _user_location(exc: BaseException, fallback: str) -> tuple[str, int | None]:
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if not os.path.abspath(f.filename).startswith(_MLPIPE_DIR)
              and not _installed(f.filename)  # inside azure-ai-ml: the user's call is the place
              and "importlib" not in f.filename and not f.filename.startswith("<frozen")]
    if not frames:
        return display_path(fallback), None
    return display_path(frames[-1].filename), frames[-1].lineno


def _installed(path: str | None) -> bool:
    import sysconfig

    roots = {sysconfig.get_path(k) for k in ("purelib", "platlib", "stdlib", "platstdlib")}
    real = os.path.realpath(path or "")
    return any(r and real.startswith(os.path.realpath(r) + os.sep) for r in roots)


def _refuse_shadowing(name: str, root: str, path: str) -> None:
    """A file named like a module of Python or of an installed package (``json.py``) would
    be confused with it: here the other module is found instead, and in a step process the
    file would hide it from mlpipe itself."""
    top = name.partition(".")[0]
    own = os.path.join(root, top)

    def mine(where: str | None) -> bool:
        where = os.path.abspath(where) if where else ""
        return where in (own, own + ".py") or where.startswith(own + os.sep)

    existing = sys.modules.get(top)
    where: str | None = None
    if existing is not None:
        where = getattr(existing, "__file__", None)
        places = [where, *(getattr(existing, "__path__", None) or [])]
        if any(mine(p) for p in places) or not (top in sys.stdlib_module_names or
                                                _installed(where)):
            return
    elif top not in sys.stdlib_module_names:
        try:
            found = importlib.util.find_spec(top)
        except (ImportError, ValueError):
            return
        if found is None or not found.has_location or mine(found.origin) or \
                not _installed(found.origin):
            return
        where = found.origin
    if top in sys.stdlib_module_names:
        what = "Python's standard library"
    else:
        what = f"an installed package ({display_path(where)})" if where else "Python"
    raise LoadError(f"{display_path(path)} has the name of the module {top!r} of {what}; "
                    f"importing it would find that module instead, and a step process would "
                    f"hide the real one from mlpipe", hint=f"rename the "
                    f"{'file' if top == name else 'folder'} (e.g. {top}_pipeline"
                    f"{'.py' if top == name else ''})", file=display_path(path))


def import_file(path: str):
    """Import the Python file at ``path`` as a module and return it."""
    if not os.path.exists(path):
        raise LoadError(f"no such file: {path}", hint="give the path of a Python file that "
                        "defines a @pipeline", file=path)
    if not path.endswith(".py"):
        raise LoadError(f"{path} is not a Python file", hint="give a .py file that defines a "
                        "@pipeline", file=path)
    abspath = os.path.abspath(path)
    name, root = _module_name(abspath)
    _refuse_shadowing(name, root, path)
    localimport.install()   # the user's modules run as their source says (what mlpipe digests)
    if root not in sys.path:
        sys.path.insert(0, root)
    existing = sys.modules.get(name)
    if existing is not None and os.path.abspath(getattr(existing, "__file__", "") or "") == abspath:
        return existing
    if existing is not None and root != os.getcwd():
        # another file of the same name (two pipeline.py): this one, never the one read before
        del sys.modules[name]
        sys.path.remove(root)
        sys.path.insert(0, root)
    try:
        with contextlib.redirect_stdout(sys.stderr):  # the module's prints: not our output
            return importlib.import_module(name)
    except MlpipeError:
        raise
    except SyntaxError as exc:
        raise LoadError(f"syntax error: {exc.msg}", hint="fix the syntax and run again",
                        file=display_path(exc.filename or path), line=exc.lineno) from exc
    except (Exception, SystemExit) as exc:
        file, line = _user_location(exc, path)
        raise LoadError(f"importing {display_path(path)} raised {type(exc).__name__}: {exc}",
                        hint="fix the error in the file (or the module it imports) and run "
                             "again", file=file, line=line) from exc


def load_pipeline(target: str) -> Pipeline:
    """The pipeline named by ``FILE.py[:function]``.

    Without ``:function`` the file must define exactly one ``@pipeline`` of its own.

    Raises:
        LoadError: the file cannot be imported or does not name exactly one pipeline.
        DefinitionError: a component or pipeline in it is malformed.
    """
    path, func = split_target(target)
    module = import_file(path)
    own = {n: v for n, v in vars(module).items()
           if isinstance(v, Pipeline) and getattr(v.fn, "__module__", None) == module.__name__}
    if func is not None:
        found = getattr(module, func, None)
        if not isinstance(found, Pipeline):
            available = ", ".join(sorted(own)) or "none"
            raise LoadError(f"{display_path(path)} has no @pipeline named {func!r} "
                            f"(pipelines: {available})", hint=f"use {display_path(path)}:NAME "
                            f"with one of those names", file=display_path(path))
        return found
    if len(own) == 1:
        return next(iter(own.values()))
    if not own:
        raise LoadError(f"{display_path(path)} defines no @pipeline",
                        hint="decorate the pipeline function with @pipeline, or name it as "
                             "FILE.py:function", file=display_path(path))
    raise LoadError(f"{display_path(path)} defines {len(own)} pipelines: "
                    f"{', '.join(sorted(own))}",
                    hint=f"choose one: {display_path(path)}:{sorted(own)[0]}",
                    file=display_path(path))


YAML_SUFFIXES = (".yml", ".yaml")


def load_spec(target: str) -> tuple[PipelineSpec, list[Diagnostic]]:
    """The PipelineSpec named by ``FILE.py[:function]`` (an mlpipe ``@pipeline``, or an
    azure-ai-ml ``@dsl.pipeline`` read as its job YAML) or an Azure ML ``pipeline.yml``.

    Returns:
        The spec and the diagnostics found while reading it (only a YAML import has any:
        the MP6xx codes); ``check_pipeline`` finds the rest.

    Raises:
        LoadError: as ``load_pipeline``; for YAML, a file mlpipe cannot represent.
    """
    if target.lower().endswith(YAML_SUFFIXES):
        from mlpipe.backends.azure.importer import load_pipeline_yaml

        imported = load_pipeline_yaml(target)
        return imported.spec, imported.diagnostics
    path, func = split_target(target)
    if func is not None and path.endswith(".py"):
        found = getattr(import_file(path), func, None)
        if not isinstance(found, Pipeline):
            from mlpipe.backends.azure.sdk import is_sdk_target, load_sdk_pipeline

            if is_sdk_target(found):  # an @dsl.pipeline, a PipelineJob or what returns one
                return load_sdk_pipeline(found, path, func)
    return load_pipeline(target).spec, []


def load_contract(ref: str):
    """The contract named on the command line.

    ``ref`` is a contract kind (``label-map``: any artifact of that kind), or
    ``MODULE:NAME`` where MODULE is a dotted module (``components.defect``) or a ``.py`` file
    and NAME a contract class or instance in it (``LABELS``), or ``component.port`` for the
    contract of a component's port (``prepare.labels``).

    Raises:
        LoadError: the module cannot be imported, or NAME is not a contract there.
    """
    from mlpipe.contracts import KINDS, is_contract

    target, sep, name = ref.rpartition(":")
    if not sep:
        if ref in KINDS:
            return KINDS[ref]
        raise LoadError(f"{ref!r} is neither a contract kind nor MODULE:NAME",
                        hint=f"use MODULE:NAME (e.g. components.defect:LABELS) or one of the "
                             f"kinds {', '.join(sorted(KINDS))}")
    if target.endswith(".py"):
        module = import_file(target)
    else:
        if os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())
        localimport.install()
        try:
            module = importlib.import_module(target)
        except MlpipeError:
            raise
        except (Exception, SystemExit) as exc:
            raise LoadError(f"importing {target} raised {type(exc).__name__}: {exc}",
                            hint="give a module importable from the current directory, or a "
                                 ".py file") from exc
    value, parts = module, name.split(".")
    for i, part in enumerate(parts):
        spec = getattr(value, "spec", None)
        if i and spec is not None and hasattr(spec, "port") and not is_contract(value):
            port = spec.port(part)
            if port is None:
                names = ", ".join(p.name for p in (*spec.inputs, *spec.outputs))
                raise LoadError(f"component {'.'.join(parts[:i])!r} has no port {part!r}",
                                hint=f"its ports: {names}")
            value = port.contract
            if value is None:
                raise LoadError(f"port {name!r} of {target} declares no contract",
                                hint="annotate the port as Input[...]/Output[...] with a contract")
            continue
        if not hasattr(value, part):
            raise LoadError(f"{target} has no attribute {'.'.join(parts[:i + 1])!r}",
                            hint="name a contract defined in that module (e.g. LABELS)")
        value = getattr(value, part)
    if not is_contract(value):
        raise LoadError(f"{ref} is a {type(value).__name__}, not a contract",
                        hint="name a contract class or instance, or component.port")
    return value
