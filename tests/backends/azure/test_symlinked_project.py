"""Relative references in an exported CLI v2 YAML are written back as the user wrote them,
whatever links lie on the way: a project whose ``shared/`` folder is a symlink (as a clone
beside ``../shared`` has) exports ``path: ../shared/data/`` as ``../shared/data/``, and a job
file read through the link (``shared/jobs/job.yml``, ``path: ../data/``) names its data
through the link too, never by a path through the link's target."""
from __future__ import annotations

import os
import pathlib
import textwrap

import pytest
import yaml
from azure.ai.ml import load_job

from backends.azure.fidelity import field_differences
from mlpipe.backends.azure.export import write_export
from mlpipe.loader import load_spec

COMPONENT = """\
$schema: https://azuremlschemas.azureedge.net/latest/commandComponent.schema.json
type: command
name: train
inputs:
  data: {type: uri_folder}
code: ../src
environment: azureml:AzureML-sklearn-1.0-ubuntu20.04-py38-cpu:33
command: python train.py --data ${{inputs.data}}
"""
PIPELINE = """\
$schema: https://azuremlschemas.azureedge.net/latest/pipelineJob.schema.json
type: pipeline
settings:
  default_compute: azureml:cpu-cluster
inputs:
  data: {type: uri_folder, path: {up}data/}
jobs:
  train:
    component: file:{up}components/train.yml
    inputs:
      data: ${{parent.inputs.data}}
"""
COMMAND_JOB = """\
$schema: https://azuremlschemas.azureedge.net/latest/commandJob.schema.json
type: command
code: {up}src
command: python train.py --data ${{inputs.data}}
inputs:
  data: {type: uri_folder, path: {up}data/}
environment: azureml:AzureML-sklearn-1.0-ubuntu20.04-py38-cpu:33
compute: azureml:cpu-cluster
"""


def _project(tmp_path: pathlib.Path, job: str, where: str = "jobs") -> pathlib.Path:
    """``tmp_path/ws/proj`` whose ``shared`` is a link to ``tmp_path/store/shared``; the job
    file in ``proj/<where>/job.yml``."""
    shared = tmp_path / "store" / "shared"
    for folder in ("data", "src", "components"):
        (shared / folder).mkdir(parents=True)
    (shared / "data" / "rows.csv").write_text("a\n1\n", encoding="utf-8")
    (shared / "src" / "train.py").write_text("print('train')\n", encoding="utf-8")
    (shared / "components" / "train.yml").write_text(COMPONENT, encoding="utf-8")
    project = tmp_path / "ws" / "proj"
    project.mkdir(parents=True)
    os.symlink(shared, project / "shared", target_is_directory=True)
    (project / where).mkdir(parents=True, exist_ok=True)
    up = "../shared/" if where == "jobs" else "../"
    (project / where / "job.yml").write_text(textwrap.dedent(job).replace("{up}", up),
                                             encoding="utf-8")
    return project


@pytest.mark.parametrize("where", ["jobs", "shared/jobs"])
@pytest.mark.parametrize(("job", "written", "expected"), [
    (PIPELINE, "pipeline.yml", {("inputs", "data", "path"): "../shared/data/",
                                ("jobs", "train", "component"): "file:./components/train.yml"}),
    (COMMAND_JOB, "job.yml", {("inputs", "data", "path"): "../shared/data/",
                              ("code",): "../shared/src"}),
])
def test_a_relative_reference_through_a_symlink_comes_back_as_written(tmp_path, where, job,
                                                                      written, expected):
    project = _project(tmp_path, job, where)
    source = project / where / "job.yml"
    spec, _ = load_spec(str(source))
    out = project / "out"  # one folder below the project, as jobs/ is
    export = write_export(spec, out, check=False)
    assert export.job_file == written
    doc = yaml.safe_load((out / written).read_text(encoding="utf-8"))
    for keys, value in expected.items():
        found = doc
        for key in keys:
            found = found[key]
        assert found == value, keys
    assert field_differences(load_job(source), load_job(out / written)) == []


@pytest.mark.parametrize("where", ["jobs", "shared/jobs"])
def test_a_component_read_through_a_symlink_keeps_its_code_beside_the_link(tmp_path, where):
    project = _project(tmp_path, PIPELINE, where)
    spec, _ = load_spec(str(project / where / "job.yml"))
    write_export(spec, project / "out", check=False)
    component = yaml.safe_load((project / "out" / "components" / "train.yml").read_text(
        encoding="utf-8"))
    # ../src from shared/components/ is shared/src: from out/components/, ../../shared/src
    # (through the link, as written), never a path through tmp_path/store
    assert component["code"] == "../../shared/src"


@pytest.mark.parametrize(("job", "written", "expected"), [
    (PIPELINE, "pipeline.yml", {("inputs", "data", "path"): "../data/"}),
    (COMMAND_JOB, "job.yml", {("inputs", "data", "path"): "../data/", ("code",): "../src"}),
])
def test_a_job_read_through_a_link_and_written_beside_its_target_keeps_its_short_path(
        tmp_path, job, written, expected):
    # the job named through the link (proj/shared/jobs/job.yml), the output folder by the
    # link's target (store/shared/out): by name the data would be three folders up and back
    # down through the project; ../data/ names the same place, as the user wrote it
    project = _project(tmp_path, job, "shared/jobs")
    source = project / "shared" / "jobs" / "job.yml"
    spec, _ = load_spec(str(source))
    out = tmp_path / "store" / "shared" / "out"
    write_export(spec, out, check=False)
    doc = yaml.safe_load((out / written).read_text(encoding="utf-8"))
    for keys, value in expected.items():
        found = doc
        for key in keys:
            found = found[key]
        assert found == value, keys
    if job is PIPELINE:
        component = yaml.safe_load((out / "components" / "train.yml").read_text(
            encoding="utf-8"))
        assert component["code"] == "../../src"
    # the same places (by the links' targets: the two files name them through different
    # links, so fidelity's by-name comparison does not apply), and azure-ai-ml loads it
    load_job(out / written)
    assert (out / "../data").resolve() == (source.parent / "../data").resolve()
