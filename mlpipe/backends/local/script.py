"""A script component's command for a local run: ``${{inputs.X}}``/``${{outputs.X}}`` replaced
by paths and values as Azure ML replaces them, ``$[[...]]`` kept or dropped, the code staged.

Text and file copying only; running the process and filing outputs is ``stepproc``'s job.
"""
from __future__ import annotations

import enum
import json
import re
import shutil
from pathlib import Path
from typing import Any

from mlpipe.digests import script_code_digest
from mlpipe.spec import ComponentSpec

_REF = re.compile(r"\$\{\{\s*(inputs|outputs)\.([A-Za-z_]\w*)\s*\}\}")
_OPTIONAL = re.compile(r"\$\[\[(.*?)\]\]", re.S)


class ScriptError(Exception):
    """A script step that cannot be started: a value its command needs, or its code, is
    missing. ``stepproc`` turns it into the step's failure message."""


def render_value(value: Any) -> str:
    """A parameter value as Azure ML writes it into a command (``True``, ``0.1``, ``adam``).

    Example:
        >>> render_value(True), render_value(0.5), render_value([1, 2])
        ('True', '0.5', '[1, 2]')
    """
    if isinstance(value, enum.Enum):
        value = value.value
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    return str(value)


def render_command(command: str, *, inputs: dict[str, str], outputs: dict[str, str],
                   params: dict[str, Any]) -> str:
    """``command`` with every ``${{inputs.X}}``/``${{outputs.X}}`` replaced by its path or value.

    A ``$[[...]]`` part is kept (without the brackets) when every reference in it has a value
    and dropped otherwise, as Azure ML does. Values are put in as plain text, unquoted, as
    Azure ML does; the command then runs in ``bash -c``.

    Raises:
        ScriptError: a reference outside ``$[[...]]`` has no value.

    Example:
        >>> render_command("python a.py --x ${{inputs.x}} $[[--y ${{inputs.y}}]]",
        ...                inputs={"x": "/data/x"}, outputs={}, params={})
        'python a.py --x /data/x '
    """
    def fill(text: str) -> tuple[str, list[str]]:
        missing: list[str] = []

        def value(match: re.Match[str]) -> str:
            kind, name = match.groups()
            if kind == "outputs" and name in outputs:
                return outputs[name]
            if kind == "inputs" and name in inputs:
                return inputs[name]
            if kind == "inputs" and params.get(name) is not None:
                return render_value(params[name])
            missing.append(f"{kind}.{name}")
            return match.group(0)

        return _REF.sub(value, text), missing

    def optional(match: re.Match[str]) -> str:
        text, missing = fill(match.group(1))
        return "" if missing else text

    text, missing = fill(_OPTIONAL.sub(optional, command))
    if missing:
        names = ", ".join("${{" + m + "}}" for m in missing)
        raise ScriptError(f"its command uses {names}, which ha{'s' if len(missing) == 1 else 've'} "
                          f"no value (bind it, or put that part of the command in $[[...]])")
    return text


def _skipped(folder: str, names: list[str]) -> set[str]:
    # The code digest leaves out hidden files and __pycache__; so does the copy that runs.
    return {n for n in names if n.startswith(".") or n == "__pycache__"}


def stage_code(component: ComponentSpec, dest: Path) -> Path:
    """Copy the component's code (what its code digest covers) to ``dest``; return the folder
    to run the command in (an empty ``dest`` when the component has no code), with an
    ``outputs`` folder in it as Azure ML makes for every job.

    Running a copy, as Azure ML runs an uploaded snapshot, keeps what the script writes next
    to itself out of the user's folder and out of the next run's code digest.

    Raises:
        ScriptError: the code is a remote reference, the local folder is gone, or it holds
            ``dest`` (a project's root, holding the evidence store).
    """
    code = component.code
    if code is not None and ":" in code.split("/", 1)[0]:
        raise ScriptError(f"its code {code!r} is not a local folder; mlpipe runs only local "
                          f"code (download it and point code: at the folder)")
    source = Path(code) if code is not None else None
    if source is not None and source.is_dir() and \
            dest.resolve().is_relative_to(source.resolve()):
        # a copy of the folder into itself never ends (and would carry the store along)
        raise ScriptError(f"its code folder {code} holds the folder its run works in "
                          f"({dest.parent.parent}): mlpipe cannot copy the folder into "
                          f"itself; point code: at the folder of its scripts (a src/ "
                          f"folder), not at the project")
    if source is None:
        dest.mkdir(parents=True)
    elif source.is_dir():
        shutil.copytree(source, dest, ignore=_skipped, symlinks=True)
    elif source.is_file():
        dest.mkdir(parents=True)
        shutil.copy2(source, dest / source.name)
    else:
        raise ScriptError(f"its code folder {code} does not exist")
    # Azure ML gives every job an ./outputs folder (uploaded with the run): a script that
    # writes there works here as it does there
    (dest / "outputs").mkdir(exist_ok=True)
    return dest


def code_changed(component: ComponentSpec) -> bool:
    """Whether the code folder's content differs from the digest the pipeline was loaded with."""
    return script_code_digest(component.code, component.command or "", Path("/")) != \
        component.code_digest


__all__ = ["ScriptError", "code_changed", "render_command", "render_value", "stage_code"]
