"""Export: every file mlpipe writes passes azure-ai-ml's offline validation and loads back,
with load_job / load_component, to the structure mlpipe wrote."""
import pathlib
import re
import shlex

import pytest
from azure.ai.ml import load_component, load_job

from backends.azure.structure import differences, loaded_form, written_form
from fixtures.azure.pipeline import fit, fixture_pipeline
from mlpipe.backends.azure.command import coerce_param, parse_step_argv, runtime_command
from mlpipe.backends.azure.export import export_pipeline, write_export
from mlpipe.backends.azure.validate import validate_export
from mlpipe.errors import ExportError, UsageError
from mlpipe.spec import (
    InputRole,
    ParamSpec,
    ParamType,
    PipelineInput,
    PipelineInputSpec,
    PipelineSpec,
    StepOutput,
    StepSpec,
)
from pipelines.defect_classifier import defect_classifier
from pipelines.defect_classifier_ddp import defect_classifier_ddp

TESTS = pathlib.Path(__file__).resolve().parents[2]


def assert_round_trip(out: pathlib.Path) -> None:
    job = validate_export(out)
    assert differences(loaded_form(job), written_form(out / "pipeline.yml")) == []
    for path in sorted((out / "components").glob("*.yml")):
        assert differences(loaded_form(load_component(path)), written_form(path)) == [], path


def test_example_pipeline_validates_and_loads_back_equal(tmp_path):
    write_export(defect_classifier.spec, tmp_path, inputs={"raw": "azureml:defect-images:1",
                                                          "split": "azureml:defect-split:1"})
    assert_round_trip(tmp_path)
    job = load_job(tmp_path / "pipeline.yml")
    assert job.settings.default_compute == "cpu-cluster"
    assert "compute" not in job.jobs["prepare"]._to_dict()
    train = load_component(tmp_path / "components" / "train.yml")
    assert train.resources is None or train.resources.instance_count in (None, 1)
    assert (train.inputs["epochs"]["min"], train.inputs["epochs"]["max"]) == (1, 200)
    assert job.tags["mlpipe.pipeline_digest"] == defect_classifier.spec.digest


def test_distributed_example_carries_per_step_compute_and_distribution(tmp_path):
    write_export(defect_classifier_ddp.spec, tmp_path,
                 inputs={"raw": "azureml:defect-images:1", "split": "azureml:defect-split:1"})
    assert_round_trip(tmp_path)
    job = load_job(tmp_path / "pipeline.yml")
    assert job.settings.default_compute == "cpu-cluster"
    assert job.jobs["train_cnn"].compute == "gpu-cluster"
    train = load_component(tmp_path / "components" / "train_cnn.yml")
    assert train.resources.instance_count == 2
    assert train.distribution.process_count_per_instance == 4


def test_fixture_pipeline_with_nesting_contracts_and_every_param_kind(tmp_path):
    # (the fixture carries check errors on purpose: it exercises what YAML can express)
    export = write_export(fixture_pipeline.spec, tmp_path, inputs={"raw": "azureml:raw:1"},
                          code_root=TESTS, check=False)
    assert_round_trip(tmp_path)
    fit_yml = load_component(tmp_path / "components" / "fit.yml")
    assert fit_yml.is_deterministic is False  # reuse=False
    assert fit_yml.inputs["prior"]["optional"] is True
    assert fit_yml.inputs["optimizer"]["enum"] == ["adam", "sgd"]
    ingest = load_component(tmp_path / "components" / "ingest.yml")
    assert "mlpipe.contract.table" in ingest.tags
    assert "Contracts: table=fixture-table:rows" in ingest.description
    assert "mlpipe installed" in ingest.description
    nested = load_job(tmp_path / "pipeline.yml").jobs["train_and_score"]
    assert nested.type == "pipeline"
    assert export.notes and "must have mlpipe installed" in export.notes[0]


def test_a_parameter_without_a_value_cannot_be_exported():
    with pytest.raises(ExportError, match=r"pipeline input 'rate' of 'p' is a parameter with "
                                          r"no value.*\n  help: pass --input rate=VALUE"):
        export_pipeline(PipelineSpec("p", (
            PipelineInputSpec("t", InputRole.ARTIFACT),
            PipelineInputSpec("rate", InputRole.PARAM, param=fit.spec.param("rate"))),
            (StepSpec("fit", fit.spec, (("table", PipelineInput("t")),
                                        ("rate", PipelineInput("rate")))),), ()),
            check=False)


def test_a_component_without_environment_cannot_be_exported():
    from fixtures.components import passthrough

    spec = PipelineSpec("p", (PipelineInputSpec("d", InputRole.ARTIFACT),),
                        (StepSpec("a", passthrough.spec, (("data", PipelineInput("d")),)),), ())
    with pytest.raises(ExportError, match=r"component 'passthrough' has no environment; Azure "
                                          r"ML runs every command component in one"):
        export_pipeline(spec)


def test_unknown_input_value_and_duplicate_output_are_refused():
    with pytest.raises(ExportError, match=r"pipeline 'defect-classifier' has no input 'nope'"):
        export_pipeline(defect_classifier.spec, inputs={"nope": "1"})
    twice = PipelineSpec("p", (PipelineInputSpec("t", InputRole.ARTIFACT),),
                         (StepSpec("fit", fit.spec, (("table", PipelineInput("t")),)),),
                         (("a", StepOutput("fit", "model")), ("b", StepOutput("fit", "model"))))
    with pytest.raises(ExportError, match=r"returns 'fit.model' as both 'a' and 'b'"):
        export_pipeline(twice, check=False)


def test_nothing_is_written_when_the_export_fails(tmp_path):
    with pytest.raises(ExportError, match=r"pipeline 'defect-classifier' has no input 'nope'\n"
                                          r"  help: its inputs are: raw, split, epochs"):
        write_export(defect_classifier.spec, tmp_path / "out", inputs={"nope": "1"})
    assert not (tmp_path / "out").exists()


def test_parameter_text_given_on_the_command_line_is_typed(tmp_path):
    export = export_pipeline(defect_classifier.spec, inputs={"epochs": "12"})
    assert export.pipeline["inputs"]["epochs"] == 12


def test_runtime_command_passes_everything_by_name_and_reads_back():
    command = runtime_command(fit.spec)
    assert command.startswith("python -m mlpipe.runtime.step --component "
                              "fixtures.azure.pipeline:fit --digest sha256:")
    assert '$[[--input "prior=${{inputs.prior}}"]]' in command  # optional: dropped when unset
    filled = re.sub(r"\$\[\[.*?\]\]", "", command)
    filled = re.sub(r"\$\{\{(inputs|outputs)\.(\w+)\}\}", lambda m: f"/mnt/{m[2]} x", filled)
    args = parse_step_argv(shlex.split(filled)[3:])
    assert args.component == "fixtures.azure.pipeline:fit" and args.digest == fit.spec.digest
    assert args.inputs == {"table": "/mnt/table x"}
    assert args.outputs == {"model": "/mnt/model x"}
    assert set(args.params) == {"rate", "optimizer", "warm"}
    assert coerce_param(fit.spec.param("warm"), "False") is False
    assert coerce_param(fit.spec.param("rate"), "0.25") == 0.25


def test_runtime_arguments_that_are_not_name_value_are_refused():
    with pytest.raises(UsageError, match=r"--param 'seed' is not NAME=VALUE"):
        parse_step_argv(["--component", "m:f", "--param", "seed"])
    with pytest.raises(UsageError, match=r"the following arguments are required: --component"):
        parse_step_argv([])
    with pytest.raises(UsageError, match=r"parameter 'n' was given 'ten', which is not a int"):
        coerce_param(ParamSpec("n", ParamType.INT), "ten")


def test_an_unwritable_output_folder_is_one_clear_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(UsageError, match=r"cannot write .*file/sub/pipeline.yml: Not a directory\n"
                                         r"  help: choose an output folder you can write to"):
        write_export(defect_classifier.spec, blocker / "sub",
                     inputs={"raw": "azureml:x:1", "split": "azureml:y:1"})
