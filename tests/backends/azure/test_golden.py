"""Golden files: the exported YAML of tests/fixtures/azure/pipeline.py, byte for byte, with
digests and the machine-specific ``code:`` path masked. Regenerate with ``make golden``.
"""
import pathlib
import re

from fixtures.azure.pipeline import fixture_pipeline
from golden_files import assert_golden_tree
from golden_files import mask as mask_digests
from mlpipe.backends.azure.export import write_export

TESTS = pathlib.Path(__file__).resolve().parents[2]


def mask(text: str) -> str:
    return re.sub(r"(?m)^code: .*$", "code: <code root>", mask_digests(text))


def test_export_matches_the_golden_files(tmp_path):
    write_export(fixture_pipeline.spec, tmp_path, inputs={"raw": "azureml:raw:1"},
                 code_root=TESTS, check=False)  # its check errors are on purpose
    written = {p.relative_to(tmp_path).as_posix(): p.read_text()
               for p in sorted(tmp_path.rglob("*.yml"))}
    assert_golden_tree("azure/fixture_pipeline", written, mask)
