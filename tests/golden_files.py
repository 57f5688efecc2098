"""Golden files: compare rendered text with tests/golden/NAME, masking volatile parts.

One mechanism and one variable for every golden file (rendered diagnostics, drawings, evidence
bundles, exported Azure ML YAML). After an intended change, regenerate them with
``make golden`` (``MLPIPE_UPDATE_GOLDEN=1`` on a pytest run does the same) and review the diff
before committing.
"""
from __future__ import annotations

import os
import pathlib
import re
from collections.abc import Callable

GOLDEN = pathlib.Path(__file__).parent / "golden"
UPDATE_VARIABLE = "MLPIPE_UPDATE_GOLDEN"
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


def mask(text: str) -> str:
    """``text`` with every sha256 digest replaced by ``sha256:<digest>``."""
    return _DIGEST.sub("sha256:<digest>", text)


def updating() -> bool:
    return bool(os.environ.get(UPDATE_VARIABLE))


def assert_golden(name: str, text: str, masked: Callable[[str], str] = mask) -> None:
    """``text`` (masked) equals tests/golden/NAME; with MLPIPE_UPDATE_GOLDEN set, write it."""
    path = GOLDEN / name
    expected_text = masked(text).rstrip("\n") + "\n"
    if updating():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(expected_text)
    assert path.exists(), f"no golden file {path}; run `make golden` to create it"
    assert expected_text == path.read_text()


def assert_golden_tree(name: str, files: dict[str, str],
                       masked: Callable[[str], str] = mask) -> None:
    """Every file of ``files`` (relative path -> text, masked) equals the one under
    tests/golden/NAME, and no golden file is missing from ``files``; with
    MLPIPE_UPDATE_GOLDEN set, write them."""
    root = GOLDEN / name
    written = {rel: masked(text) for rel, text in files.items()}
    if updating():
        for rel, text in written.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text)
    expected = {p.relative_to(root).as_posix(): p.read_text()
                for p in sorted(root.rglob("*")) if p.is_file()}
    assert sorted(written) == sorted(expected), "run `make golden` after an intended change"
    for rel in written:
        assert written[rel] == expected[rel], rel
