"""Export checks: what an export of a pipeline with given options would get wrong on Azure ML
(a data input left without a path, a module its code root cannot import, large files in the
code upload), found before anything is written; diagnostics only, never raises for them.
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mlpipe.backends.azure import upload
from mlpipe.backends.azure.documents import module_root, where
from mlpipe.codes import (
    LARGE_FILE_IN_UPLOAD,
    MODULE_OUTSIDE_CODE_ROOT,
    PIPELINE_INPUT_WITHOUT_PATH,
)
from mlpipe.diagnostics import Diagnostic
from mlpipe.paths import display_path
from mlpipe.spec import InputRole, PipelineSpec


def export_checks(spec: PipelineSpec, *, inputs: Mapping[str, Any] | None = None,
                  code_root: str | os.PathLike[str] | None = None) -> list[Diagnostic]:
    """What an export of ``spec`` with these options would get wrong on Azure ML, found before
    anything is written: a data input the job leaves without a path (MP605, a warning: the job
    file is still useful with ``az ml job create --set inputs.X.path=...``) and a function
    component whose module cannot be imported from the ``code_root`` folder uploaded as its
    code (MP606, an error: the step would fail there with ``ModuleNotFoundError``).

    Example:
        >>> export_checks(defect_classifier.spec, inputs={"raw": "azureml:raw:1"})
        [...]  # one MP605 warning: 'split' has no path
    """
    given = dict(inputs or {})
    found: list[Diagnostic] = []
    for inp in spec.inputs:
        if inp.role is not InputRole.ARTIFACT or inp.name in given:
            continue
        if inp.default is None and inp.required:
            loc = inp.location or spec.location
            found.append(Diagnostic.of(
                PIPELINE_INPUT_WITHOUT_PATH,
                f"pipeline input {inp.name!r} has no path, so Azure ML cannot run the exported "
                f"job as written", hint=f"pass --input {inp.name}=azureml:NAME:VERSION (a data "
                f"asset, datastore URI or local path), or give the job's input a path",
                file=loc.file if loc else None, line=loc.line if loc else None))
    for up in upload.component_uploads((comp for _, comp in spec.leaves()), code_root,
                                       module_root):
        found.extend(_large_files(up))
    if code_root is not None:
        root = Path(code_root).resolve()
        seen: set[str] = set()
        for step, comp in spec.leaves():
            module = (comp.function or "").partition(":")[0]
            if not module or module in seen:
                continue
            seen.add(module)
            if _module_file_under(root, module) is None:
                found.append(Diagnostic.of(
                    MODULE_OUTSIDE_CODE_ROOT,
                    f"component {comp.name!r} runs {comp.function}, but module {module!r} "
                    f"cannot be imported from the code root {display_path(str(root))}",
                    hint=f"pass the folder that holds {module.replace('.', '/')}.py as "
                         f"--code-root (by default, the folder the module was imported from)",
                    step=step.name, **where(comp)))
    return found


def _large_files(up: upload.Upload) -> list[Diagnostic]:
    large = [] if up.own_ignore else up.large()
    if not large:
        return []
    named = ", ".join(f"{rel} ({size / 2**20:.0f} MiB)" for rel, size in large[:5])
    more = f" and {len(large) - 5} more" if len(large) > 5 else ""
    return [Diagnostic.of(
        LARGE_FILE_IN_UPLOAD,
        f"the code upload of {display_path(str(up.root))} holds {len(large)} file(s) of "
        f"{upload.LARGE_FILE_BYTES // 2**20} MiB or more beside the modules the steps import: "
        f"{named}{more}; Azure ML uploads them with every changed submission",
        hint="move data out of the components' packages (pass it as a pipeline input, a data "
             "asset) or list it in the code root's .amlignore (then it is yours to keep)")]


def _module_file_under(root: Path, module: str) -> Path | None:
    """The file ``import module`` finds under ``root`` (a module or a package), if any."""
    base = root.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None
