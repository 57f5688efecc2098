"""A component file is validated as azure-ai-ml's ``load_job`` reads it in the pipeline, not by
``load_component`` alone, which is stricter (it refuses a name like ``r-iris-example`` that a
pipeline job referencing the file is accepted with, in Azure ML's own examples and CI)."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "azure" / "riris"


def compile_(folder: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mlpipe.cli", "compile", "pipeline.yml",
                           "--out", "build"], cwd=folder, capture_output=True, text=True,
                          timeout=300)


def test_a_component_load_job_accepts_in_its_pipeline_compiles(tmp_path):
    shutil.copytree(FIXTURE, tmp_path / "job")
    done = compile_(tmp_path / "job")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "job" / "build" / "components" / "comp.yml").exists()


def test_a_component_load_job_refuses_too_is_still_refused(tmp_path):
    shutil.copytree(FIXTURE, tmp_path / "job")
    comp = tmp_path / "job" / "comp.yml"
    comp.write_text(comp.read_text().replace("iris: {type: uri_file}",
                                             "iris: {type: uri_file, mode: sideways}"))
    done = compile_(tmp_path / "job")
    assert done.returncode == 2
    assert "azure-ai-ml cannot load build/components/comp.yml: " in done.stderr
    assert not (tmp_path / "job" / "build").exists()
