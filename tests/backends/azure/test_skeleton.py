"""`mlpipe compile` validates a pipeline job as its skeleton (one job of each form): azure-ai-ml
must accept and reject an export exactly as it does when it validates every job.

Each claim is held against the real azure-ai-ml: the whole job and its skeleton give the same
verdict, and the same problems (each job's problem reported by the job that stands for it), on
the examples, the golden fixture, generated pipelines and deliberately broken exports; literal
values of one form are accepted alike; and what the skeleton relies on (offline, azure-ai-ml
resolves no reference to another job) is pinned, so an azure-ai-ml that starts checking it
fails here first.
"""
import io
import json
import math
import os
import pathlib
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fixtures.azure.pipeline import fixture_pipeline
from mlpipe import Compute, Environment, Input, Output, Param, component, pipeline
from mlpipe.backends.azure import yamlfile
from mlpipe.backends.azure.export import write_export
from mlpipe.backends.azure.skeleton import job_form, skeleton
from mlpipe.backends.azure.validate import Validation, validate_export, validate_export_fully
from mlpipe.backends.azure.validate import quiet_azure_ai_ml as quiet
from mlpipe.errors import ExportError
from pipelines.defect_classifier import defect_classifier
from pipelines.defect_classifier_ddp import defect_classifier_ddp

TESTS = pathlib.Path(__file__).resolve().parents[2]
ROOT = TESTS.parent
ENV = Environment("bench-env", version="1")


@component(environment=ENV, compute=Compute("cpu-cluster"))
def load(raw: Input["uri_folder"], out: Output["uri_folder"], rows: Param[int, 1:100] = 5):
    pass


@component(environment=ENV, compute=Compute("cpu-cluster"))
def transform(data: Input["uri_folder"], out: Output["uri_folder"], scale: Param[float] = 1.0,
              label: Param[str] = "x"):
    pass


@component(environment=ENV, compute=Compute("gpu-cluster"))
def fit(data: Input["uri_folder"], out: Output["uri_folder"], epochs: Param[int, 1:200] = 3):
    pass


def chain(n: int):
    @pipeline(name=f"chain-{n}")
    def generated(raw):
        out = load(raw=raw).out
        for i in range(n - 1):
            out = (transform(data=out, scale=float(i), label=f"run {i}") if i % 2
                   else fit(data=out, epochs=1 + i % 199)).out
        return {"result": out}
    return generated


def _export(spec, out: pathlib.Path, **options) -> pathlib.Path:
    options.setdefault("inputs", {"raw": "azureml:raw:1"})
    options.setdefault("code_root", ROOT)
    write_export(spec, out, check=False, **options)
    return out


def _problems(result, stands_for=None) -> set[tuple[str, str]]:
    """(path, message) of each error, a job's path named by the job that stands for it."""
    stood = {name: kept for kept, names in (stands_for or {}).items() for name in names}
    found = set()
    for error in result._to_dict().get("errors", []):
        path = error.get("path", "")
        parts = path.split(".")
        if len(parts) > 1 and parts[0] == "jobs":
            parts[1] = stood.get(parts[1], parts[1])
        found.add((".".join(parts), error.get("message", "")))
    return found


def _verdicts(out: pathlib.Path) -> tuple[set, set]:
    """azure-ai-ml's problems with the whole job and with its skeleton, each job's named by
    the job that stands for it in the skeleton."""
    quiet()
    from azure.ai.ml import load_job

    path = out / "pipeline.yml"
    whole = yamlfile.fast_load(path)
    kept = skeleton(whole)
    return tuple(_load_and_validate(load_job, document, path, kept.stands_for)
                 for document in (whole, kept.pipeline))


def _load_and_validate(load_job, document, path, stands_for) -> set[tuple[str, str]]:
    try:
        job = load_job(io.StringIO(yamlfile.dump(document)), relative_origin=str(path))
    except Exception as exc:  # what load_job refuses: marshmallow's nested messages
        stood = {name: kept for kept, names in stands_for.items() for name in names}
        found = set()

        def walk(messages, where):
            if isinstance(messages, dict):
                for key, value in messages.items():
                    if where == ("jobs",):
                        key = stood.get(key, key)
                    walk(value, (*where, str(key)))
            elif isinstance(messages, list):
                for value in messages:
                    walk(value, where)
            elif isinstance(messages, str) and '"errors"' in messages:  # a report as JSON
                report = json.JSONDecoder().raw_decode(messages[messages.index("{"):])[0]

                class Report:
                    def _to_dict(self):
                        return report
                found.update((w, f"load: {m}") for w, m in _problems(Report(), stands_for))
            else:
                found.add((".".join(where), f"load: {messages}"))
        walk(getattr(exc, "messages", str(exc)), ())
        return found
    return _problems(job._validate(), stands_for)


def _rewrite(out: pathlib.Path, change) -> pathlib.Path:
    path = out / "pipeline.yml"
    doc = yamlfile.fast_load(path)
    change(doc)
    path.write_text(yamlfile.dump(doc))
    return out


# --- the skeleton itself (no azure-ai-ml) ------------------------------------------------------

def test_a_long_chain_keeps_one_job_of_each_form(tmp_path):
    _export(chain(200).spec, tmp_path)
    doc = yamlfile.fast_load(tmp_path / "pipeline.yml")
    kept = skeleton(doc)
    assert kept.jobs == 200
    # load (reads the pipeline's input); fit and transform (each reads a job's output, whichever
    # job it is); the last fit, which also writes the pipeline's output
    assert list(kept.pipeline["jobs"]) == ["load", "fit", "transform", "fit_100"]
    assert sorted(n for names in kept.stands_for.values() for n in names) == sorted(doc["jobs"])
    assert {k: v for k, v in kept.pipeline.items() if k != "jobs"} == \
        {k: v for k, v in doc.items() if k != "jobs"}
    assert all(kept.pipeline["jobs"][n] == doc["jobs"][n] for n in kept.stands_for)  # as written


@pytest.mark.parametrize("a, b, alike", [
    ({"epochs": 3}, {"epochs": 150}, True),
    ({"scale": 0.5}, {"scale": -1e300}, True),
    ({"scale": 0.5}, {"scale": math.inf}, False),  # not a finite float: kept as it is
    ({"flag": True}, {"flag": False}, True),
    ({"flag": True}, {"flag": 1}, False),
    ({"label": "run 1"}, {"label": "run 2, again"}, True),
    ({"label": "run 1"}, {"label": "azureml:data:1"}, False),  # could be read as an asset
    ({"label": "run 1"}, {"label": "${{parent.inputs.x}}"}, False),  # an expression
    ({"n": 2**62}, {"n": 2**64}, False),  # past 64 bits: kept as it is
    ({"data": "${{parent.jobs.fit.outputs.out}}"}, {"data": "${{parent.jobs.x_9.outputs.out}}"},
     True),
    ({"data": "${{parent.jobs.fit.outputs.out}}"}, {"data": "${{parent.jobs.fit.outputs.m}}"},
     False),  # another output port
    ({"data": "${{parent.inputs.raw}}"}, {"data": "${{parent.inputs.other}}"}, False),
])
def test_forms_mask_only_plain_literals_and_job_names(a, b, alike):
    job = {"type": "command", "component": "./components/fit.yml"}
    assert (job_form("fit_2", {**job, "inputs": a}) ==
            job_form("fit_3", {**job, "inputs": b})) is alike


def test_odd_names_and_other_job_types_keep_a_form_of_their_own():
    job = {"type": "command", "component": "./components/fit.yml", "inputs": {"epochs": 3}}
    assert job_form("fit_2", job) == job_form("fit_3", job)
    assert job_form("Fit", job) != job_form("Fit_2", job)  # not a plain lowercase name
    sweep = {"type": "sweep", "trial": "./components/fit.yml"}
    assert job_form("a", sweep) != job_form("b", sweep)
    assert job_form("fit_2", {**job, "compute": "azureml:gpu"}) != job_form("fit_3", job)


# --- azure-ai-ml: the skeleton's verdict is the whole job's -------------------------------------

EXPORTS = {
    "defect_classifier": lambda out: _export(defect_classifier.spec, out, inputs={
        "raw": "azureml:defect-images:1", "split": "azureml:defect-split:1"}),
    "defect_classifier_ddp": lambda out: _export(defect_classifier_ddp.spec, out, inputs={
        "raw": "azureml:defect-images:1", "split": "azureml:defect-split:1"}),
    "golden fixture": lambda out: _export(fixture_pipeline.spec, out, code_root=TESTS),
    "chain of 60": lambda out: _export(chain(60).spec, out),
}


@pytest.mark.parametrize("name", EXPORTS)
def test_exports_validate_alike_whole_and_as_skeletons(name, tmp_path):
    out = EXPORTS[name](tmp_path)
    whole, kept = _verdicts(out)
    assert whole == kept
    if not whole:
        assert validate_export(out).jobs == len(yamlfile.fast_load(out / "pipeline.yml")["jobs"])
        validate_export_fully(out)


def _drop_default_compute(doc):
    doc["settings"].pop("default_compute")


def _drop_a_required_input(doc):
    doc["jobs"]["transform_3"]["inputs"].pop("data")


def _misspell_a_field(doc):
    doc["jobs"]["fit_4"]["comptue"] = "azureml:gpu-cluster"


def _bad_resources(doc):
    for name in ("fit_2", "fit_5"):
        doc["jobs"][name]["resources"] = {"instance_count": "two"}


def _a_literal_where_data_goes(doc):
    doc["jobs"]["transform_2"]["inputs"]["data"] = 5


def _a_malformed_expression(doc):
    doc["jobs"]["fit_3"]["inputs"]["epochs"] = "${{parent.jobs.fit_2.outputs}}"


def _an_unknown_pipeline_input(doc):
    doc["jobs"]["load"]["inputs"]["raw"] = "${{parent.inputs.nothing}}"


@pytest.mark.slow
@pytest.mark.parametrize("change", [
    _drop_default_compute, _drop_a_required_input, _misspell_a_field, _bad_resources,
    _a_literal_where_data_goes, _a_malformed_expression, _an_unknown_pipeline_input,
], ids=lambda f: f.__name__.strip("_"))
def test_broken_exports_are_rejected_alike_whole_and_as_skeletons(change, tmp_path):
    out = _rewrite(_export(chain(12).spec, tmp_path), change)
    whole, kept = _verdicts(out)
    assert whole == kept
    if whole:  # what azure-ai-ml rejects, compile rejects, the long way or not
        with pytest.raises(ExportError, match=r"azure-ai-ml('s validation rejects| cannot load)"):
            validate_export(out)
        with pytest.raises(ExportError, match=r"azure-ai-ml('s validation rejects| cannot load)"):
            validate_export_fully(out)


def test_a_rejection_names_the_jobs_of_the_same_form(tmp_path):
    out = _rewrite(_export(chain(12).spec, tmp_path), _drop_default_compute)
    with pytest.raises(ExportError, match=r"jobs\.transform\.compute: Compute not set.*"
                                          r"the same holds for 4 more job\(s\) of transform's "
                                          r"form: transform_2, transform_3, transform_4, "
                                          r"transform_5"):
        validate_export(out)


LITERALS = {
    "int": st.integers(-2**63, 2**63 - 1),
    "float": st.floats(allow_nan=False, allow_infinity=False),
    "bool": st.booleans(),
    "str": st.from_regex(r"[A-Za-z0-9 _.,+\-]{0,40}", fullmatch=True),
}


@pytest.mark.slow
@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(sorted(LITERALS)), data=st.data())
def test_literals_of_one_form_are_accepted_alike(tmp_path, kind, data):
    value = data.draw(LITERALS[kind])
    sample = {"int": 3, "float": 0.5, "bool": True, "str": "x"}[kind]
    out = tmp_path / "export"
    if not out.exists():
        _export(chain(3).spec, out)
    verdicts = []
    for literal in (sample, value):
        doc = yamlfile.fast_load(out / "pipeline.yml")
        for job in doc["jobs"].values():
            for name in ("epochs", "scale", "label"):
                if name in job.get("inputs", {}):
                    job["inputs"][name] = literal
        quiet()
        from azure.ai.ml import load_job

        job = load_job(io.StringIO(yamlfile.dump(doc)),
                       relative_origin=str(out / "pipeline.yml"))
        verdicts.append(_problems(job._validate()))
    assert job_form("fit", {"type": "command", "inputs": {"epochs": sample}}) == \
        job_form("fit", {"type": "command", "inputs": {"epochs": value}})
    assert verdicts[0] == verdicts[1]


def test_offline_validation_resolves_no_reference_to_another_job(tmp_path):
    # what the skeleton relies on: a kept job may name a job the skeleton left out
    out = _rewrite(_export(chain(4).spec, tmp_path), lambda doc: doc["jobs"]["fit"]["inputs"]
                   .__setitem__("data", "${{parent.jobs.not_in_this_pipeline.outputs.out}}"))
    whole, _ = _verdicts(out)
    assert whole == set()


# --- the command ---------------------------------------------------------------------------------

CHAIN = """
from mlpipe import Compute, Environment, Input, Output, Param, component, pipeline


@component(compute=Compute("cpu-cluster"), environment=Environment("env", version="1"))
def step(data: Input["uri_folder"], out: Output["uri_folder"], scale: Param[float] = 1.0):
    pass


@pipeline(name="chain")
def chain(raw):
    out = raw
    for i in range(60):
        out = step(data=out, scale=i / 10).out
    return {"result": out}
"""


def test_compile_validates_in_a_forked_process(tmp_path):
    (tmp_path / "chain.py").write_text(CHAIN)
    done = subprocess.run([sys.executable, "-m", "mlpipe.cli", "compile", "chain.py", "-o",
                           "out", "--input", "raw=azureml:raw:1"], cwd=tmp_path,
                          capture_output=True, text=True,
                          env={**{k: v for k, v in os.environ.items()
                                  # an earlier test's MLClient leaves its loopback cloud here
                                  if k not in ("AZUREML_CURRENT_CLOUD", "ARM_CLOUD_METADATA_URL")},
                               "PYTHONPATH": f"{tmp_path}:{ROOT}"})
    assert done.returncode == 0, done.stderr
    assert "(validated by azure-ai-ml)" in done.stdout
    assert "experimental class" not in done.stderr  # the forked process is quiet too


def test_the_forked_process_reports_what_azure_rejects_naming_the_jobs_alike(tmp_path):
    out = _rewrite(_export(chain(12).spec, tmp_path), _drop_default_compute)
    validation = Validation.start()
    with pytest.raises(ExportError, match=r"jobs\.transform\.compute: Compute not set.*"
                                          r"the same holds for 4 more job\(s\) of transform's "
                                          r"form: transform_2, transform_3, transform_4, "
                                          r"transform_5"):
        validation.run(out)
    assert validation.pid is None


def test_a_validation_never_asked_leaves_no_process_behind():
    validation = Validation.start()
    pid = validation.pid
    validation.close()
    if pid is not None:
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, 0)


def test_a_validation_whose_process_died_runs_here(tmp_path):
    out = _export(chain(6).spec, tmp_path)
    validation = Validation.start()
    if validation.pid is not None:
        os.kill(validation.pid, 9)
    assert validation.run(out) == {"jobs": 6, "forms": 4}
    assert validation.pid is None


# --- third-party YAML: every corpus pipeline mlpipe reads and writes back -----------------------

def _corpus_pipelines() -> list[str]:
    from backends.azure import test_corpus

    return test_corpus.VALID if test_corpus.CORPUS is not None else []


@pytest.mark.slow
@pytest.mark.skipif(not _corpus_pipelines(), reason="the third-party corpus is absent: "
                    "../shared/corpus/azure-ai-ml-test-configs (or MLPIPE_CORPUS)")
@pytest.mark.parametrize("path", _corpus_pipelines())
def test_corpus_exports_validate_alike_whole_and_as_skeletons(path, tmp_path):
    from backends.azure.test_corpus import CORPUS
    from mlpipe.errors import MlpipeError
    from mlpipe.loader import load_spec

    try:
        spec, _ = load_spec(str(CORPUS / path))
    except MlpipeError:
        pytest.skip("mlpipe refuses to read it (test_corpus.py counts the refusals)")
    export = write_export(spec, tmp_path, check=False)
    if export.job_file != "pipeline.yml":
        pytest.skip("a command job, not a pipeline job")
    whole, kept = _verdicts(tmp_path)
    assert whole == kept
