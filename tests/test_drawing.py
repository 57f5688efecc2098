"""The DAG drawn as text, DOT and Mermaid: golden files for the example pipeline."""
import pytest

from golden_files import assert_golden
from mlpipe.drawing import RENDERERS
from mlpipe.graph import compile_pipeline
from pipelines.defect_classifier import defect_classifier
from test_graph import training


@pytest.mark.parametrize("fmt", sorted(RENDERERS))
def test_example_pipeline_drawing(fmt):
    assert_golden(f"defect_classifier.{fmt}", RENDERERS[fmt](compile_pipeline(defect_classifier.spec)))


@pytest.mark.parametrize("fmt", sorted(RENDERERS))
def test_nested_pipeline_drawing(fmt):
    assert_golden(f"nested.{fmt}", RENDERERS[fmt](compile_pipeline(training.spec)))


def test_mermaid_ids_are_safe_and_unique():
    text = RENDERERS["mermaid"](compile_pipeline(training.spec))
    assert "features_load" in text and "features.load" in text
    for line in text.splitlines()[1:]:
        ident = line.strip().split("[")[0].split("(")[0].split(" ")[0]
        assert ident.replace("_", "").isalnum(), line
