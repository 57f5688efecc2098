"""The candidate of an Azure ML pipeline job named in its tags (issue 39): read from YAML and
from azure-ai-ml Python alike, kept by compile, and each wrong tag one located error."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mlpipe.backends.azure.candidate_tags import candidate_of
from mlpipe.errors import LoadError
from mlpipe.spec import CandidateSpec

ROOT = Path(__file__).resolve().parents[3]
SDK = ROOT / "tests" / "fixtures" / "azure" / "sdk"


@pytest.mark.parametrize(("tags", "found"), [
    ({"team": "vision"}, None),
    ({"mlpipe.candidate.model": "model"}, CandidateSpec("model")),
    ({"mlpipe.candidate.model": "model", "mlpipe.candidate.evaluation": "report",
      "mlpipe.candidate.name": "defects"}, CandidateSpec("model", "report", "defects")),
    ({"mlpipe.candidate": '{"model": "model", "evaluation": "report", "name": null}'},
     CandidateSpec("model", "report")),  # as mlpipe's export writes it
])
def test_the_tags_name_the_candidate(tags, found):
    assert candidate_of(tags, ["model", "report"]) == found


@pytest.mark.parametrize(("tags", "message"), [
    ({"mlpipe.candidate.model": "weights"},
     r"tag mlpipe.candidate.model names 'weights', which is no output of the pipeline "
     r"\(outputs: model, report\)"),
    ({"mlpipe.candidate.evaluation": "report"},
     r"the tags name a candidate without its model \(\['evaluation'\]\)"),
    ({"mlpipe.candidate.modle": "model"}, "tag mlpipe.candidate.modle names no part of a "
                                          "candidate"),
    ({"mlpipe.candidate": "model"}, "tag mlpipe.candidate is 'model', not a JSON mapping "
                                    "naming the model output"),
])
def test_a_wrong_candidate_tag_is_one_error(tags, message):
    with pytest.raises(LoadError, match=message):
        candidate_of(tags, ["model", "report"], "pipeline.yml", 3)


def test_an_azure_ai_ml_pipelines_candidate_is_read_and_kept_by_compile(tmp_path):
    from mlpipe.loader import load_spec

    spec, _ = load_spec(f"{SDK / 'pipelines.py'}:reviewed")
    assert spec.candidate == CandidateSpec("model", "report")
    done = subprocess.run([sys.executable, "-m", "mlpipe.cli", "compile",
                           f"{SDK / 'pipelines.py'}:reviewed", "-o", str(tmp_path / "build")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={"XDG_CACHE_HOME": str(tmp_path / "cache"),
                               "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    again, _ = load_spec(str(tmp_path / "build" / "pipeline.yml"))
    assert again.candidate == CandidateSpec("model", "report")


def test_a_tag_naming_no_output_is_located_in_the_users_file(tmp_path):
    (tmp_path / "p.py").write_text(
        "from azure.ai.ml import Input, Output, command, dsl\n\n"
        "fit = command(command='echo ${{outputs.model}}', environment='azureml:env:1',\n"
        "              outputs={'model': Output(type='uri_folder')})\n\n\n"
        "@dsl.pipeline(default_compute='cpu', tags={'mlpipe.candidate.model': 'weights'})\n"
        "def p():\n"
        "    trained = fit()\n"
        "    return {'model': trained.outputs.model}\n")
    done = subprocess.run([sys.executable, "-m", "mlpipe.cli", "check", "p.py:p"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300,
                          env={"XDG_CACHE_HOME": str(tmp_path / "cache"),
                               "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.startswith(
        "error: p.py:7: tag mlpipe.candidate.model names 'weights', which is no output of the "
        "pipeline (outputs: model)"), done.stderr
