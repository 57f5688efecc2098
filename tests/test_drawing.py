"""The DAG drawn as text, DOT and Mermaid: golden files for the example pipeline."""
import pytest

from golden_files import assert_golden
from mlpipe.drawing import RENDERERS
from mlpipe.graph import compile_pipeline
from pipelines.defect_classifier import defect_classifier
from pipelines.defect_classifier_ddp import defect_classifier_ddp
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


@pytest.mark.parametrize("fmt", sorted(RENDERERS))
def test_distributed_pipeline_drawing_keeps_the_topology_and_the_contracts(fmt):
    drawn = RENDERERS[fmt](compile_pipeline(defect_classifier_ddp.spec))
    assert_golden(f"defect_classifier_ddp.{fmt}", drawn)
    graph = compile_pipeline(defect_classifier_ddp.spec)
    [train] = [n for n in graph.steps.values() if n.component.distribution is not None]
    dist = train.component.distribution
    marker = (f"{train.component.instances}x{dist.processes_per_instance()} {dist.type}")
    assert f"[{marker}]" in drawn  # the same marker in the text, DOT and Mermaid
    if fmt == "mermaid":
        assert f'{train.id}[["' in drawn  # and the subroutine shape
    if fmt == "dot":
        assert "peripheries=2" in drawn
    assert "image-folder:" in drawn and "mlflow-model:" in drawn


def test_an_edge_between_two_different_contracts_shows_both():
    from mlpipe.drawing import _edge_contract

    assert _edge_contract("label-map:a", "label-map:b", ("uri_file",)) == \
        "label-map:a → label-map:b"
    assert _edge_contract("uri_file", "label-map:b", ("uri_file",)) == "label-map:b"
    assert _edge_contract("label-map:a", "uri_file", ("uri_file",)) == "label-map:a"
    assert _edge_contract("uri_file", None, ("uri_file",)) == "uri_file"
    assert _edge_contract(None, None, ()) is None


@pytest.mark.parametrize("fmt", ["dot"])
def test_graphviz_reads_the_dot(tmp_path, fmt):
    import shutil
    import subprocess

    if shutil.which("dot") is None:
        pytest.skip("Graphviz's dot is not installed")
    drawn = RENDERERS[fmt](compile_pipeline(defect_classifier_ddp.spec))
    done = subprocess.run(["dot", "-Tsvg"], input=drawn, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert "[2x4 pytorch]" in done.stdout and "mlflow&#45;model:defect&#45;cnn" in done.stdout
