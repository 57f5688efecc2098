"""The wheel of this mlpipe, built from the checkout it is imported from and kept by the digest
of its sources: what `mlpipe environment` puts in an Azure ML image and what `submit --isolate`
installs, so that a local isolated run installs what the image would.

Builds with pip (no network: ``--no-deps --no-build-isolation``); never installs anything.
"""
from __future__ import annotations

import fcntl
import os
import re
import subprocess
import sys
from pathlib import Path

from mlpipe.digests import digest_lines, manifest_line, sha256_file
from mlpipe.errors import UsageError
from mlpipe.version import DISTRIBUTION, __version__

#: What a wheel of this project is called: ``mlpipe_aml-0.1.0-py3-none-any.whl``.
WHEEL_GLOB = f"{DISTRIBUTION.replace('-', '_')}-*.whl"


def source_tree() -> Path | None:
    """The checkout this mlpipe is imported from (the folder holding its ``pyproject.toml``);
    None when it is an installed copy."""
    here = Path(__file__).resolve().parents[1]
    try:
        text = (here / "pyproject.toml").read_text(encoding="utf-8")
    except OSError:
        return None
    return here if re.search(rf'(?m)^name\s*=\s*"{DISTRIBUTION}"', text) else None


def source_digest(tree: Path) -> str:
    """The hex digest of what the wheel is built from: ``pyproject.toml``, ``README.md`` and
    every file of the package, as a manifest of names, sizes and file digests (caches and
    bytecode left out)."""
    files = [tree / "pyproject.toml", tree / "README.md"]
    for folder, dirs, names in os.walk(tree / "mlpipe"):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        files += [Path(folder) / n for n in sorted(names) if not n.endswith((".pyc", ".pyo"))]
    lines = (manifest_line(str(path.relative_to(tree)), path.stat().st_size, sha256_file(path))
             for path in files if path.is_file())
    return digest_lines(lines).removeprefix("sha256:")


def build_wheel(out_dir: Path) -> Path:
    """The wheel of this checkout under ``out_dir/<source digest>/``, built once per state of
    the sources (a second call with unchanged sources finds it).

    Raises:
        UsageError: mlpipe is not imported from a checkout, or pip could not build it.

    Example:
        >>> build_wheel(Path("build/wheels")).name
        'mlpipe_aml-0.1.0-py3-none-any.whl'
    """
    tree = source_tree()
    if tree is None:
        raise UsageError(f"mlpipe {__version__} is not imported from a checkout (no "
                         f"pyproject.toml of {DISTRIBUTION} above the package), so there is no "
                         f"source to build its wheel from",
                         hint="run it from a clone of mlpipe (pip install -e '.[authoring]'), "
                              "or pass the wheel to install")
    folder = out_dir / source_digest(tree)[:16]
    found = sorted(folder.glob(WHEEL_GLOB))
    if len(found) == 1:
        return found[0]
    partial = folder.with_name(folder.name + f".{os.getpid()}.partial")
    partial.mkdir(parents=True, exist_ok=True)
    # setuptools builds in the checkout's own build/ and *.egg-info: two builds of one tree at
    # once (two steps, two test workers) would tear each other's files, so they take turns
    lock_file = tree / "build" / "wheel.lock"
    lock_file.parent.mkdir(exist_ok=True)
    with open(lock_file, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
             "--quiet", "--disable-pip-version-check", "-w", str(partial), str(tree)],
            capture_output=True, text=True, timeout=600, cwd=tree)
    built = sorted(partial.glob(WHEEL_GLOB))
    if done.returncode != 0 or len(built) != 1:
        said = [line.strip() for line in (done.stdout + done.stderr).splitlines() if line.strip()]
        errors = [line for line in said if line.startswith("error:")]
        # the builder's own error before pip's summary of it ("error: metadata-generation-failed")
        own = [line for line in errors if not re.fullmatch(r"error: [a-z-]+", line)]
        last = (own or errors or said or ["pip built no wheel"])[-1]
        hint = "`pip wheel --no-deps .` in the checkout shows the whole error"
        if "bdist_wheel" in last:
            hint = ("this environment's setuptools cannot build wheels: pip install "
                    "'setuptools>=70.1' (it builds without isolation, from what is installed)")
        raise UsageError(f"cannot build the {DISTRIBUTION} wheel of {tree}: {last}", hint=hint)
    try:
        partial.rename(folder)  # whole or not at all; a concurrent build may have won
    except OSError:
        import shutil

        shutil.rmtree(partial, ignore_errors=True)
    return sorted(folder.glob(WHEEL_GLOB))[0]
