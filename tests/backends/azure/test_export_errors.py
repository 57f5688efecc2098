"""The library exporter refuses with ExportError whatever `mlpipe compile` refuses (never an
AttributeError), and says so when it writes @latest for an environment without a version."""
import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings

import test_properties as generated
from components.defect import train
from mlpipe import Environment
from mlpipe.backends.azure.export import export_pipeline
from mlpipe.checks import check_pipeline
from mlpipe.diagnostics import has_errors
from mlpipe.errors import ExportError
from mlpipe.spec import ComponentSpec, PipelineSpec
from pipelines.defect_classifier import defect_classifier

SPEC = defect_classifier.spec


@pytest.mark.parametrize("value, kwargs, message", [
    (train, {}, r"export_pipeline exports a pipeline, and component 'train' is a component"),
    (train.spec, {}, r"component 'train' is a component"),
    ("pipelines/defect_classifier.py", {}, r"exports a pipeline, not str 'pipelines/"),
    (None, {}, r"exports a pipeline, not NoneType None"),
    (SPEC, {"inputs": ["raw"]}, r"inputs \['raw'\] is not a mapping of input names to values"),
    (SPEC, {"inputs": {"raw": object()}}, r"input 'raw' is given object <object object"),
    (SPEC, {"inputs": {"epochs": "abc"}}, r"parameter 'epochs' was given 'abc'"),
    (SPEC, {"default_compute": 5}, r"default_compute 5 is not a string"),
    (SPEC, {"out_dir": None}, r"out_dir None is not a path"),
    (SPEC, {"code_root": "/no/such/folder"}, r"code_root '/no/such/folder' is not a folder"),
])
def test_what_the_cli_refuses_is_an_export_error(value, kwargs, message):
    with pytest.raises(ExportError, match=message):
        export_pipeline(value, **kwargs)


def test_the_pipeline_function_itself_exports_like_its_spec():
    assert export_pipeline(defect_classifier).pipeline == export_pipeline(SPEC).pipeline


_ENV = Environment("e", version="1")


def _with_environments(spec: PipelineSpec) -> PipelineSpec:
    steps = []
    for step in spec.steps:
        target = step.target
        target = (dataclasses.replace(target, environment=_ENV)
                  if isinstance(target, ComponentSpec) else _with_environments(target))
        steps.append(dataclasses.replace(step, target=target))
    return dataclasses.replace(spec, steps=tuple(steps))


def _exports_or_refuses(spec: PipelineSpec) -> None:
    errors = has_errors(check_pipeline(spec)[1])
    try:
        export_pipeline(spec)
    except ExportError as err:
        if errors:
            assert "has check errors" in err.message
    else:
        assert not errors, "a pipeline with check errors was exported"


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(generated.messy_pipelines())
def test_traced_pipelines_export_or_raise_export_error(plan):
    _exports_or_refuses(_with_environments(generated.build_messy(plan).spec))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(generated.hand_built())
def test_hand_built_specs_export_or_raise_export_error(spec):
    _exports_or_refuses(_with_environments(spec))


def test_an_unversioned_environment_is_exported_as_latest_and_said_so():
    from fixtures.checks.mp801 import fit_bad
    from mlpipe import pipeline

    @pipeline
    def p(data):
        return fit_bad(data=data).model

    export = export_pipeline(p, check=False)
    [doc] = [d for name, d in export.files.items() if "fit_bad" in name]
    assert doc["environment"] == "azureml:sklearn-env@latest"
    assert ("environment(s) sklearn-env have no version: written as azureml:sklearn-env@latest, "
            "which name whichever version is newest when the job is submitted (MP801); pin a "
            "version") in export.notes
