"""Import: CLI v2 YAML becomes an mlpipe pipeline or component; mlpipe's checks catch what
azure-ai-ml's offline validation misses; import -> export loads to the same structure."""
import pathlib
import re

import pytest
from azure.ai.ml import load_job

from backends.azure.structure import differences, leaf_jobs
from mlpipe import Input, Output, component, load_component, pipeline
from mlpipe.artifacts import AssetType
from mlpipe.backends.azure.export import write_export
from mlpipe.backends.azure.validate import validate_export_fully
from mlpipe.checks import check_pipeline
from mlpipe.contracts import Contract
from mlpipe.distribution import PyTorch
from mlpipe.errors import DefinitionError, LoadError, UsageError
from mlpipe.loader import load_spec
from mlpipe.spec import Environment, ParamType

YAML = pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "azure" / "yaml"


def codes(name):
    spec, found = load_spec(str(YAML / name))
    _, diagnostics = check_pipeline(spec)
    return found + diagnostics


@pytest.mark.parametrize("name, code, line", [
    ("cycle.yml", "MP101", 6),
    ("dangling.yml", "MP111", 4),
    ("wrong_port.yml", "MP103", 6),
    ("wrong_output.yml", "MP104", 11),
    ("bad_expression.yml", "MP601", 13),
    ("bad_expression.yml", "MP602", 6),
])
def test_checks_report_what_azure_validation_misses(name, code, line):
    found = [d for d in codes(name) if d.code == code]
    assert found, f"{code} not reported for {name}"
    assert found[0].file.endswith(f"fixtures/azure/yaml/{name}") and found[0].line == line
    if code in ("MP101", "MP111", "MP103", "MP104"):
        assert load_job(YAML / name)._validate().passed  # azure-ai-ml itself lets it through


def test_a_good_pipeline_yaml_has_no_wiring_problems():
    # CLI v2 YAML cannot state mlpipe's writer policy or a cluster's VM size, so the
    # distributed `train` node gets exactly those two launch findings and nothing else.
    assert sorted(d.code for d in codes("pipeline.yml")) == ["MP513", "MP516"]


def test_imported_pipeline_has_inline_referenced_and_nested_jobs():
    spec, _ = load_spec(str(YAML / "pipeline.yml"))
    prepare, train, evaluate = spec.steps
    assert prepare.target.command.startswith("python prep.py")
    assert prepare.target.compute.name == "cpu-cluster"  # the default compute
    assert [p.name for p in prepare.target.outputs] == ["prepared"]
    assert train.target.name == "train_model" and train.target.compute.name == "gpu-cluster"
    assert train.target.distribution == PyTorch(4) and train.target.instances == 2
    assert train.target.reuse is False
    assert evaluate.target.steps[0].target.command.startswith("python score.py")
    assert spec.input("epochs").default == 20


def test_what_mlpipe_cannot_read_is_one_load_error_listing_all_of_it():
    with pytest.raises(LoadError) as info:
        load_spec(str(YAML / "unreadable.yml"))
    text = info.value.render()
    assert re.search(r"unreadable\.yml:4: 3 problems mlpipe cannot read:\n"
                     r"  .*unreadable\.yml:4: inputs\.raw\.type: has type 'tensor_folder', which "
                     r"is not an Azure ML input type\n"
                     r"  .*unreadable\.yml:9: jobs\.train\.resources\.instance_count: is 'two', "
                     r"not an integer >= 1\n"
                     r"  .*unreadable\.yml:13: jobs\.publish\.type: job 'publish' has type "
                     r"'magic', which is not an Azure ML job type\n", text), text


@pytest.mark.parametrize("name, message", [
    ("missing.yml", r"no such file: .*missing\.yml"),
])
def test_a_file_that_is_not_there_is_one_clear_load_error(name, message):
    with pytest.raises(LoadError, match=message):
        load_spec(str(YAML / name))


@pytest.mark.parametrize("name, step, kind, note, findings", [
    # each trial is launched as its component says (2 x 4 processes): the launch checks hold
    ("sweep.yml", "tune", "sweep", "a sweep job", ["MP513"]),
    ("registered.yml", "train", "command", "a registered component (azureml:train_model:3)",
     []),
])
def test_jobs_that_run_only_on_azure_are_read_checked_and_noted(name, step, kind, note,
                                                                findings):
    spec, _ = load_spec(str(YAML / name))
    target = spec.step(step).target
    assert (target.kind, target.azure_only) == (kind, note)
    found = [d.code for d in codes(name) if d.severity.value != "info"]
    assert found == findings
    notes = [d for d in codes(name) if d.code == "MP603"]
    assert [d.message for d in notes] == [
        f"step '{step}' is {note}: mlpipe checks its wiring and exports it, but it runs only "
        f"on Azure ML"]


@pytest.mark.slow
def test_import_then_export_loads_to_the_same_structure(tmp_path):
    spec, _ = load_spec(str(YAML / "pipeline.yml"))
    write_export(spec, tmp_path, check=False)  # the round trip, whatever the checks say
    exported = validate_export_fully(tmp_path)
    assert differences(leaf_jobs(load_job(YAML / "pipeline.yml")), leaf_jobs(exported)) == []


# --- load_component --------------------------------------------------------------------------

def test_load_component_reads_every_field():
    train = load_component(YAML / "train.yml")
    spec = train.spec
    assert (spec.name, spec.version, spec.reuse) == ("train_model", "3.1.0", False)
    assert spec.environment == Environment("train-env", version="5")
    assert spec.distribution == PyTorch(4) and spec.instances == 2
    assert spec.command.startswith("python train.py --data ${{inputs.data}}")
    epochs = spec.param("epochs")
    assert (epochs.type, epochs.default, epochs.minimum, epochs.maximum) == (ParamType.INT, 10, 1, 200)
    assert spec.param("optimizer").choices == ("adam", "sgd")
    assert spec.input("checkpoint").optional and spec.input("checkpoint").kind is AssetType.CUSTOM_MODEL
    assert spec.output("model").kind is AssetType.MLFLOW_MODEL
    assert spec.code.endswith("fixtures/azure/yaml/src")


def test_loaded_component_is_usable_beside_decorated_ones():
    train = load_component(YAML / "train.yml")

    @component(environment=Environment("e", version="1"))
    def make(raw: Input["uri_folder"], data: Output["uri_folder"]):
        pass

    @pipeline
    def mixed(raw):
        return {"model": train(data=make(raw=raw).data, epochs=300).model}

    _, diagnostics = check_pipeline(mixed.spec)
    # epochs 300 is over the YAML's max 200; MP513/MP516: the YAML states no writer or VM size;
    # MP113: `make`, defined inside this test function, is one no step process could import
    assert sorted(d.code for d in diagnostics) == ["MP113", "MP202", "MP513", "MP516"]
    with pytest.raises(UsageError, match=r"component 'train_model' runs the command"):
        train.fn()


def test_contracts_attach_to_a_loaded_component():
    class Model(Contract):
        kind = "fixture-model"
        transport = AssetType.MLFLOW_MODEL

    train = load_component(YAML / "train.yml").with_contracts(model=Model)
    assert train.spec.output("model").contract is Model
    with pytest.raises(DefinitionError, match=r"contract fixture-model travels as mlflow_model "
                                              r"but port 'train_model.data' is uri_folder"):
        train.with_contracts(data=Model)
    with pytest.raises(DefinitionError, match=r"component 'train_model' has no port 'nope'"):
        train.with_contracts(nope=Model)


def test_load_component_reads_every_azure_ml_component_kind_and_keeps_unmodelled_fields():
    spark = load_component(YAML / "spark_component.yml").spec
    assert (spark.kind, spark.azure_only) == ("spark", "a Spark job")
    services = load_component(YAML / "with_services.yml").spec
    assert services.origin.document["services"]["jupyter"]["type"] == "jupyter_lab"
    with pytest.raises(LoadError, match=r"bad_input_type\.yml:6: inputs\.m\.type: has type "
                                        r"'tensor_folder', which is not an Azure ML input type"):
        load_component(YAML / "bad_input_type.yml")


def test_a_yaml_file_that_is_not_utf8_is_one_clear_error(tmp_path):
    bad = tmp_path / "x.yml"
    bad.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(LoadError, match=r"x.yml is not UTF-8 text \(byte 0: invalid start byte\)"):
        load_spec(str(bad))


# --- the launch declaration in YAML tags ------------------------------------------------------

DDP = YAML / "ddp"


def test_an_azureml_examples_ddp_pipeline_is_warned_not_refused_before_it_declares_a_writer():
    found = [d for d in codes("ddp/pipeline_undeclared.yml") if d.severity.value != "info"]
    # MP802: the data set is a download URL, a reference whose content can change
    assert [(d.code, d.severity.value, d.step, d.port) for d in found] == [
        ("MP513", "warning", "train", "model_dir"), ("MP802", "warning", None, None)]
    assert found[0].hint.startswith("declare it in the component's YAML: tags: "
                                    "{mlpipe.writers.model_dir: rank0} (rank 0 saves)")


def test_once_declared_in_tags_it_checks_clean_and_the_declaration_is_read():
    # clean but for the download URL its data set comes from (a moving reference)
    assert [d.code for d in codes("ddp/pipeline_declared.yml")] == ["MP802"]
    train = load_component(DDP / "train_declared.yml").spec
    dist = train.distribution
    assert dist.writer_policy("model_dir") == "rank0" and dist.backend == "nccl"
    assert dist.metric("train_loss").reduce == "mean"
    assert train.compute.sku == "Standard_NC24rs_v3"


@pytest.mark.slow
def test_the_declaration_survives_export_and_reimport(tmp_path):
    from mlpipe.backends.azure.export import write_export

    spec, _ = load_spec(str(DDP / "pipeline_declared.yml"))
    write_export(spec, tmp_path)
    exported = validate_export_fully(tmp_path)
    assert differences(leaf_jobs(load_job(DDP / "pipeline_declared.yml")), leaf_jobs(exported),
                       ) == []
    again, _ = load_spec(str(tmp_path / "pipeline.yml"))
    assert again.step("train").target.distribution == spec.step("train").target.distribution
    _, diagnostics = check_pipeline(again)
    assert [d.code for d in diagnostics if d.severity.value != "info"] == ["MP802"]  # its URL


@pytest.mark.parametrize("tags, message", [
    ({"mlpipe.writers.model_dir": "everyone"},
     r"tags: tags declare writer policy 'everyone' for 'model_dir' is not 'rank0', 'sharded' "
     r"or a rank number"),
    ({"mlpipe.metrics.loss": "median"},
     r"tags: tags declare metric declaration 'median' is not one of"),
])
def test_a_bad_declaration_is_one_load_error_naming_the_tag(tmp_path, tags, message):
    import shutil

    import yaml

    shutil.copytree(DDP / "src", tmp_path / "src")
    doc = yaml.safe_load((DDP / "train_undeclared.yml").read_text())
    doc["tags"] = tags
    (tmp_path / "train.yml").write_text(yaml.safe_dump(doc))
    with pytest.raises(LoadError, match=message):
        load_component(tmp_path / "train.yml")
