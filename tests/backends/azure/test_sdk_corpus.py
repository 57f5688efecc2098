"""Acceptance on azure-ai-ml Python pipelines written by others (issue 39): the builders of
azure-ai-ml's own test configurations (``../shared/corpus/azure-ai-ml-test-configs/
dsl_pipeline``, read in place; DSL_MANIFEST.tsv), each read with ``check``, compiled and
loaded back with ``load_job``, and compared field by field with the REST body azure-ai-ml
builds for the same job. No error on a job azure-ai-ml accepts; a refusal only where
azure-ai-ml itself refuses the job (it cannot build it, validate it or build its request)."""
from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
CORPUS = ROOT.parent / "shared" / "corpus" / "azure-ai-ml-test-configs"
MANIFEST = CORPUS / "DSL_MANIFEST.tsv"
#: What loading any inline component back from a file changes in the REST body: azure-ai-ml
#: names it anonymous (and so drops its client hash) and records where it was read from.
LOADING_CHANGES = {"name", "version", "_source", "isAnonymous", "client_component_hash"}


def buildable() -> list[str]:
    """The files whose jobs azure-ai-ml builds here (``builds``: yes or partial)."""
    if not MANIFEST.exists():
        return []
    rows = [row.split("\t") for row in MANIFEST.read_text().splitlines()[1:]]
    return [path for path, _functions, builds in rows if builds.startswith(("yes", "partial"))]


def targets(path: str) -> list[str]:
    """What a team would name in ``path``: each ``generate_*()`` builder, and each job the
    module assigns by calling one of its ``@dsl.pipeline`` functions (``job = p()``)."""
    source = (CORPUS / path).read_text()
    pipelines = re.findall(r"^@(?:dsl\.)?pipeline\b.*\n(?:@.*\n)*def (\w+)", source, re.M)
    jobs = [name for name, called in re.findall(r"^(\w+) = (\w+)\(", source, re.M)
            if called in pipelines]
    return re.findall(r"^def (generate\w*)\(\)", source, re.M) + jobs


def builders() -> list[tuple[str, str]]:
    """(file, name) of every target of the buildable files."""
    return [(path, name) for path in buildable() for name in targets(path)]


BUILDERS = builders()


def built(path: str, function: str):
    """The job azure-ai-ml builds (its module under a name of its own)."""
    found = importlib.util.spec_from_file_location(
        "corpus_" + re.sub(r"\W", "_", f"{path}_{function}"), CORPUS / path)
    module = importlib.util.module_from_spec(found)
    found.loader.exec_module(module)
    value = getattr(module, function)
    return value() if callable(value) else value


def refused_by_azure_ai_ml(path: str, function: str) -> str:
    """Why azure-ai-ml itself will not submit the job (building, validating or building its
    request raises, or its validation fails); empty when it would."""
    try:
        job = built(path, function)
        result = job._validate()
        if not result.passed:
            return str(result.error_messages)
        job._to_rest_object()
    except Exception as exc:  # what azure-ai-ml raised
        return f"{type(exc).__name__}: {exc}"
    return ""


@pytest.mark.skipif(not BUILDERS, reason="the shared azure-ai-ml corpus is not here")
def test_every_file_azure_ai_ml_builds_gives_a_target():
    assert [path for path in buildable() if not targets(path)] == []


@pytest.mark.parametrize(("path", "function"), BUILDERS, ids=[f"{p}:{f}" for p, f in BUILDERS])
def test_a_corpus_pipeline_round_trips_to_the_rest_body_azure_ai_ml_builds(tmp_path, path,
                                                                            function):
    from backends.azure.fidelity import field_differences
    from mlpipe.backends.azure.export import export_pipeline
    from mlpipe.backends.azure.staging import write_staged
    from mlpipe.backends.azure.validate import quiet_azure_ai_ml
    from mlpipe.checks import check_pipeline
    from mlpipe.errors import LoadError
    from mlpipe.loader import load_spec

    quiet_azure_ai_ml()
    from azure.ai.ml import load_job

    try:
        spec, found = load_spec(f"{CORPUS / path}:{function}")
    except LoadError as err:
        assert err.message.startswith(("azure-ai-ml could not build", "azure-ai-ml cannot",
                                       "node ")), err.message
        assert "azure-ai-ml" in err.message and err.file.endswith(path)
        assert refused_by_azure_ai_ml(path, function)  # a true refusal, never mlpipe's own
        return
    assert refused_by_azure_ai_ml(path, function) == ""
    graph, checked = check_pipeline(spec)
    assert [d.render() for d in found + checked if d.severity.value == "error"] == []
    out = tmp_path / "build"
    write_staged(export_pipeline(graph.spec, out_dir=out), out)
    text = (out / "pipeline.yml").read_text()
    assert not re.search(r"\b(code|path): /", text)  # relative: another machine submits it
    differences = [d for d in field_differences(built(path, function),
                                                load_job(out / "pipeline.yml"))
                   if d.startswith("rest.")]
    assert {re.sub(r"^.*\.", "", d.split(":")[0]) for d in differences} <= LOADING_CHANGES, \
        differences


@pytest.mark.skipif(not BUILDERS, reason="the shared azure-ai-ml corpus is not here")
def test_docs_state_the_corpus_figure_as_measured():
    """docs/azure.md's figure: every target azure-ai-ml accepts round-trips (the test above
    holds each), so the figure is the targets less azure-ai-ml's own refusals."""
    from mlpipe.backends.azure.validate import quiet_azure_ai_ml

    quiet_azure_ai_ml()
    text = (ROOT / "docs" / "azure.md").read_text()
    stated = text.split("<!-- sdk corpus figure: begin -->", 1)[1].split(
        "<!-- sdk corpus figure: end -->", 1)[0]
    refused = [(path, function) for path, function in BUILDERS
               if refused_by_azure_ai_ml(path, function)]
    stated = " ".join(stated.split())
    assert f"the {len(buildable())} files azure-ai-ml builds here, {len(BUILDERS)} targets" \
        in stated
    assert f"**{len(BUILDERS) - len(refused)} of {len(BUILDERS)} round-trip**" in stated
    assert f"The other {len(refused)} azure-ai-ml refuses itself" in stated
    for path in {path for path, _ in refused}:
        assert path.removeprefix("dsl_pipeline/") in stated, path
    assert "False errors: 0." in stated
