"""Golden files: compare rendered text with tests/golden/NAME, masking volatile parts.

Regenerate after an intended change with ``MLPIPE_REGEN_GOLDEN=1 make test`` (or the same
variable on a single pytest run) and review the diff before committing.
"""
import os
import pathlib
import re

GOLDEN = pathlib.Path(__file__).parent / "golden"
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


def mask(text: str) -> str:
    return _DIGEST.sub("sha256:<digest>", text)


def assert_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    masked = mask(text).rstrip("\n") + "\n"
    if os.environ.get("MLPIPE_REGEN_GOLDEN"):
        path.write_text(masked)
    assert path.exists(), f"no golden file {path}; run with MLPIPE_REGEN_GOLDEN=1 to create it"
    assert masked == path.read_text()
