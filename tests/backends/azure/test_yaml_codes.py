"""The codes about Azure ML YAML (MP103 on a nested pipeline, MP114-MP116, MP603, MP604) and
the export's own (MP605, MP606): each has a triggering and a near-identical clean fixture."""
import pathlib

import pytest

from mlpipe.backends.azure.export_checks import export_checks
from mlpipe.checks import check_pipeline
from mlpipe.loader import load_spec

ROOT = pathlib.Path(__file__).resolve().parents[3]
CODES = ROOT / "tests" / "fixtures" / "azure" / "codes"


def diagnostics(name):
    spec, found = load_spec(str(CODES / name))
    _, checked = check_pipeline(spec)
    return found + checked


@pytest.mark.parametrize("code, line, severity, message", [
    ("MP103", 8, "error", "pipeline 'fit_twice' has no input 'dat' (step 'twice')"),
    ("MP114", 2, "error", "step 'mp114_bad' runs code from tests/fixtures/azure/codes/trainer, "
                          "which does not exist: azure-ai-ml refuses the job (\"Can't find "
                          "directory or file\") and there is nothing to run here"),
    ("MP115", 2, "error", "type: Command is not how azure-ai-ml spells the command job type: "
                          "its load_job compares the text exactly and refuses it as "
                          "\"Unsupported job type: Command\"; mlpipe reads it as command"),
    ("MP116", 7, "error", "the trial's command reads search_space.epochs, which the search space "
                          "of sweep 'tune' does not set: Azure ML has no value to put there, so "
                          "no trial runs as written"),
    ("MP603", 8, "info", "step 'fit' is a sweep job: mlpipe checks its wiring and exports it, "
                         "but it runs only on Azure ML"),
    ("MP604", 9, "warning", "parameter 'fit.epochs' (int) gets 10.5 from pipeline input "
                            "'epochs', which Azure ML reads as 10"),
])
def test_each_yaml_code_has_a_trigger_and_a_clean_twin(code, line, severity, message):
    found = [d for d in diagnostics(f"{code.lower()}_bad.yml") if d.code == code]
    assert [(d.file, d.line, d.severity.value, d.message) for d in found] == [
        (f"tests/fixtures/azure/codes/{code.lower()}_bad.yml", line, severity, message)]
    assert found[0].hint
    assert [d for d in diagnostics(f"{code.lower()}_good.yml") if d.code != "MP603" or
            code == "MP603"] == []  # a sweep's twin is still a sweep (MP603, info)


def test_a_sweep_node_whose_search_space_sets_what_its_trial_does_not_take():
    found = [d for d in diagnostics("mp116_node_bad.yml") if d.code == "MP116"]
    assert [(d.line, d.message) for d in found] == [
        (16, "the search space of sweep 'fit' sets 'learning_rate', which its trial 'fit' does "
             "not take as an input (it takes: data, epochs, rate, resume): the sampled value "
             "reaches no trial")]
    assert [d for d in diagnostics("mp603_bad.yml") if d.code == "MP116"] == []  # sets `rate`


def test_mp105_holds_for_a_projects_component_and_not_for_a_registered_one():
    # a registered component's ports are seen only as the job binds them: two of them meant
    # for one artifact (compute_metrics' ground_truth and prediction) is not observable here
    assert [d.code for d in diagnostics("mp105_bad.yml")] == ["MP105"]
    assert [d.code for d in diagnostics("mp105_registered.yml")] == ["MP603"]


def test_a_typo_in_a_nested_pipeline_binding_suggests_the_input():
    found = [d for d in diagnostics("mp103_bad.yml") if d.code == "MP103"]
    assert found[0].hint == "did you mean 'data'? 'fit_twice' takes: data"


def test_values_azure_ml_reads_without_change_are_accepted_as_their_type():
    # "12" for an integer, 1e-3 (text in YAML 1.1) for a number, "True" for a boolean
    spec, _ = load_spec(str(CODES / "mp604_good.yml"))
    fit = spec.step("fit")
    assert dict(fit.bindings)["rate"].value == "1e-3"  # kept as written, for the export
    assert diagnostics("mp604_good.yml") == []


def test_compile_warns_on_a_data_input_without_a_path_and_not_when_given():
    spec, _ = load_spec(str(ROOT / "pipelines" / "defect_classifier.py"))
    found = export_checks(spec, inputs={"raw": "azureml:raw:1"})
    assert [(d.code, d.severity.value, d.message) for d in found] == [
        ("MP605", "warning", "pipeline input 'split' has no path, so Azure ML cannot run the "
                             "exported job as written")]
    assert found[0].file.endswith("pipelines/defect_classifier.py") and found[0].line
    assert export_checks(spec, inputs={"raw": "azureml:raw:1", "split": "azureml:split:1"}) == []


def test_compile_refuses_a_code_root_the_component_module_cannot_be_imported_from(tmp_path):
    spec, _ = load_spec(str(ROOT / "pipelines" / "defect_classifier.py"))
    given = {"raw": "azureml:raw:1", "split": "azureml:split:1"}
    found = export_checks(spec, inputs=given, code_root=ROOT / "components")
    assert {(d.code, d.severity.value) for d in found} == {("MP606", "error")}
    assert any(d.message == "component 'prepare' runs components.defect:prepare, but module "
                            "'components.defect' cannot be imported from the code root "
                            "components" for d in found), [d.message for d in found]
    assert export_checks(spec, inputs=given, code_root=ROOT) == []
