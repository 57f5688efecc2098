"""Import -> export must not change a job: azure-ai-ml's load_job of the original YAML and of
mlpipe's export are equal field by field (tests/backends/azure/fidelity.py says how they are
compared), on our own fixtures; test_corpus.py does the same on third-party YAML."""
import pathlib
import re

import pytest
import yaml
from azure.ai.ml import load_component, load_job

from backends.azure.fidelity import field_differences
from mlpipe import load_component as mlpipe_component
from mlpipe import pipeline
from mlpipe.backends.azure.export import write_export
from mlpipe.backends.azure.validate import validate_export
from mlpipe.checks import check_pipeline
from mlpipe.errors import ExportError
from mlpipe.loader import load_spec

ROOT = pathlib.Path(__file__).resolve().parents[3]
AZURE = ROOT / "tests" / "fixtures" / "azure"
FIDELITY = AZURE / "fidelity" / "pipeline.yml"


def exported(source: pathlib.Path, out: pathlib.Path, **options) -> pathlib.Path:
    spec, _ = load_spec(str(source))
    export = write_export(spec, out, **options)
    return out / export.job_file


@pytest.mark.parametrize("source", [
    "fidelity/pipeline.yml", "yaml/pipeline.yml", "yaml/sweep.yml", "yaml/registered.yml",
    "scripts/pipeline.yml", "codes/mp603_good.yml", "codes/mp103_good.yml",
    "job/train_job.yml",
], ids=lambda s: s.replace("/", ":"))
def test_import_then_export_is_the_same_job_field_by_field(source, tmp_path):
    written = exported(AZURE / source, tmp_path / "build")
    original, again = load_job(AZURE / source), load_job(written)
    assert field_differences(original, again) == []
    # azure-ai-ml's validation says the same of both (a pipeline with no compute is not
    # given one behind the user's back: `compile --compute NAME` does that on request)
    assert again._validate()._to_dict() == original._validate()._to_dict()


def test_compile_says_how_to_give_a_compute_to_a_job_that_names_none(tmp_path):
    spec, _ = load_spec(str(AZURE / "scripts" / "pipeline.yml"))
    write_export(spec, tmp_path / "a")
    with pytest.raises(ExportError, match=r"jobs\.scale\.compute: Compute not set") as info:
        validate_export(tmp_path / "a")
    assert info.value.hint == ("the job names no compute: pass --compute NAME (a cluster, or "
                               "serverless)")
    write_export(spec, tmp_path / "b", default_compute="serverless")
    validate_export(tmp_path / "b")


def test_the_written_files_keep_what_earlier_exports_changed(tmp_path):
    written = exported(FIDELITY, tmp_path / "deep" / "build")
    text = written.read_text()
    job = yaml.safe_load(text)
    # registry URIs stay as written (not .../labels/latest@latest)
    assert job["jobs"]["score"]["component"] == (
        "azureml://registries/azureml/components/score_model/labels/latest")
    assert job["jobs"]["prepare"]["environment"] == (
        "azureml://registries/azureml/environments/sklearn-1.5/labels/latest")
    assert "@latest@" not in text and "latest@latest" not in text
    # settings, modes, registrations, identity, limits, queue settings, env vars
    assert job["settings"] == {"default_compute": "azureml:cpu-cluster",
                               "default_datastore": "azureml:workspaceblobstore",
                               "continue_on_step_failure": True, "force_rerun": False}
    assert job["inputs"]["images"]["mode"] == "ro_mount"
    assert job["outputs"]["model"] == {"type": "mlflow_model", "mode": "rw_mount",
                                       "name": "defect-model", "version": "7"}
    assert job["jobs"]["score"]["outputs"]["scores"]["path"] == (
        "azureml://datastores/workspaceblobstore/paths/scores/")
    prepare = job["jobs"]["prepare"]
    assert (prepare["identity"], prepare["limits"], prepare["queue_settings"]) == (
        {"type": "user_identity"}, {"timeout": 3600}, {"job_tier": "standard"})
    assert prepare["environment_variables"]["PREP_THREADS"] == "4"
    # a job's literal input keeps its own type, not the component port's
    assert job["jobs"]["train"]["inputs"]["extra"]["type"] == "uri_file"
    # relative paths are rebased and name the same places
    base = written.parent
    assert (base / job["inputs"]["images"]["path"]).resolve() == (FIDELITY.parent / "data")
    assert (base / prepare["code"]).resolve() == FIDELITY.parent / "src"
    train = yaml.safe_load((base / job["jobs"]["train"]["component"]).read_text())
    assert (base / "components" / train["environment"]["conda_file"]).resolve() == (
        FIDELITY.parent / "env" / "conda.yml")
    # a nested pipeline whose compute is a pipeline input keeps it on its job, nowhere else
    evaluate = yaml.safe_load((base / job["jobs"]["evaluate"]["component"]).read_text())
    assert evaluate["jobs"]["report"]["compute"] == "${{parent.inputs.compute_name}}"
    assert "azureml:${{" not in text


def test_only_what_is_asked_for_changes(tmp_path):
    written = exported(FIDELITY, tmp_path / "build", inputs={
        "epochs": "30", "images": "azureml:defect-images:4"}, default_compute="big-cluster",
        experiment="nightly", run_id="r-0123456789")
    found = field_differences(load_job(FIDELITY), load_job(written))
    changed = sorted({re.sub(r"^(rest\.properties|)\.?", "", d.split(":", 1)[0])
                      for d in found})
    assert changed == ["experimentName", "experiment_name", "inputs.epochs",
                       "inputs.epochs.value", "inputs.images.path", "inputs.images.uri",
                       "settings.default_compute"], found
    job = yaml.safe_load(written.read_text())
    assert job["inputs"]["epochs"] == 30 and job["tags"]["mlpipe.run_id"] == "r-0123456789"
    assert job["tags"]["team"] == "vision"


@pytest.mark.parametrize("change, field", [
    (lambda j: j["inputs"]["images"].pop("mode"), ".inputs.images.mode"),
    (lambda j: j["jobs"]["score"].update(component="azureml://registries/azureml/components/"
                                                   "score_model/labels/latest@latest"),
     ".jobs.score.component"),
    (lambda j: j["settings"].pop("continue_on_step_failure"), ".settings.continue_on_step_failure"),
    (lambda j: j["jobs"]["train"]["inputs"]["extra"].update(type="uri_folder"),
     ".jobs.train.inputs.extra.type"),
    (lambda j: j["jobs"]["prepare"]["environment_variables"].pop("PREP_THREADS"),
     ".jobs.prepare.environment_variables.PREP_THREADS"),
    (lambda j: j["inputs"]["images"].update(path="./data"), ".inputs.images.path"),
    (lambda j: j["jobs"]["prepare"].pop("identity"), ".jobs.prepare.identity"),
    (lambda j: j["tags"].update(team="other"), ".tags.team"),
])
def test_the_comparison_sees_each_kind_of_change(change, field, tmp_path):
    written = exported(FIDELITY, tmp_path / "build")
    job = yaml.safe_load(written.read_text())
    change(job)
    written.write_text(yaml.safe_dump(job, sort_keys=False))
    found = field_differences(load_job(FIDELITY), load_job(written))
    assert any(d.startswith(f"{field}:") for d in found), found


def test_a_component_loaded_from_yaml_is_exported_as_written(tmp_path):
    add = mlpipe_component(AZURE / "scripts" / "add.yml")

    @pipeline(name="sum-only")
    def sum_only(scaled):
        return {"total": add(scaled=scaled).total}

    export = write_export(sum_only.spec, tmp_path / "build", inputs={"scaled": "azureml:s:1"})
    rel = next(k for k in export.files if k.startswith("components/"))
    original = load_component(AZURE / "scripts" / "add.yml")._to_dict()
    again = load_component(tmp_path / "build" / rel)._to_dict()
    assert {k: v for k, v in again.pop("tags").items() if not k.startswith("mlpipe.")} == {}
    assert original.pop("code") == again.pop("code")  # both resolved to the same folder
    assert again == original


def test_a_single_command_job_is_a_one_step_pipeline_with_every_check(tmp_path):
    spec, found = load_spec(str(AZURE / "job" / "train_job.yml"))
    assert [s.name for s in spec.steps] == ["train_job"]
    step = spec.steps[0].target
    assert (step.instances, step.distribution.processes_per_node) == (1, 2)
    assert {i.name for i in spec.inputs} == {"data", "epochs", "rate"}
    assert spec.input("epochs").default == 3 and spec.input("rate").default == "1e-2"
    _, diagnostics = check_pipeline(spec)
    assert [d.code for d in found + diagnostics if d.severity.value != "info"] == []
