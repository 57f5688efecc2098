"""Golden files: the exported YAML of tests/fixtures/azure/pipeline.py, byte for byte, with
digests and the machine-specific ``code:`` path masked.

Regenerate after an intended change of the export format:
    MLPIPE_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/backends/azure/test_golden.py
"""
import os
import pathlib
import re

from fixtures.azure.pipeline import fixture_pipeline
from mlpipe.backends.azure.export import write_export

GOLDEN = pathlib.Path(__file__).resolve().parents[2] / "golden" / "azure" / "fixture_pipeline"
TESTS = pathlib.Path(__file__).resolve().parents[2]


def mask(text: str) -> str:
    text = re.sub(r"sha256:[0-9a-f]{64}", "sha256:<digest>", text)
    return re.sub(r"(?m)^code: .*$", "code: <code root>", text)


def test_export_matches_the_golden_files(tmp_path):
    write_export(fixture_pipeline.spec, tmp_path, inputs={"raw": "azureml:raw:1"},
                 code_root=TESTS)
    written = {p.relative_to(tmp_path).as_posix(): mask(p.read_text())
               for p in sorted(tmp_path.rglob("*.yml"))}
    if os.environ.get("MLPIPE_UPDATE_GOLDEN"):
        for rel, text in written.items():
            (GOLDEN / rel).parent.mkdir(parents=True, exist_ok=True)
            (GOLDEN / rel).write_text(text)
    expected = {p.relative_to(GOLDEN).as_posix(): p.read_text()
                for p in sorted(GOLDEN.rglob("*.yml"))}
    assert sorted(written) == sorted(expected)
    for rel in written:
        assert written[rel] == expected[rel], rel
