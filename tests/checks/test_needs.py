"""What a step's environment must install, read from its conda file: this mlpipe's runtime by
its own distribution name and version (MP631), what its contracts' validators import (MP634),
and an MLflow client the workspace accepts (MP635); and the requirement lines they read."""
from __future__ import annotations

import re

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mlpipe.checks import check_pipeline
from mlpipe.environments import pinned_version, requirement_name, runtime_line, runtime_listing
from mlpipe.loader import load_spec
from mlpipe.version import DISTRIBUTION, __version__

PIPELINE = '''
from mlpipe import Environment, Input, Output, component, pipeline
from mlpipe.contracts import Column, MLflowModel, TabularSchema

ROWS = TabularSchema("rows", columns=[Column("id", "string", role="key"),
                                      Column("t", "float64", unit="degC")])
ENV = Environment("fit-env", version="1", conda_file="env.yml")


@component(environment=ENV)
def fit(rows: Input[ROWS], model: Output[MLflowModel("m")]):
    pass


@pipeline
def p(rows):
    return fit(rows=rows).model
'''
NEEDS = ["pyarrow>=14", "pint>=0.24", "mlflow>=2.16,<2.19", "azureml-mlflow>=1.57"]


def _found(tmp_path, pip: list[str], codes=("MP631", "MP634", "MP635")):
    module = tmp_path / f"{tmp_path.name.replace('-', '_')}.py"  # a module name per test
    module.write_text(PIPELINE)
    (tmp_path / "env.yml").write_text("dependencies:\n  - python=3.11\n  - pip:\n"
                                      + "".join(f"      - {line}\n" for line in pip))
    spec, _ = load_spec(f"{module}:p")
    return [d for d in check_pipeline(spec)[1] if d.code in codes]


@pytest.mark.parametrize(("runtime", "match"), [
    (None, r"does not list mlpipe-aml: the job would fail with 'No module named mlpipe'"),
    ("mlpipe", r"lists 'mlpipe': the package index gives the name 'mlpipe' to an unrelated "
               r"project \(0\.1\.0 \.\.\. 0\.1\.17\)"),
    ("mlpipe==0.1.0", r"lists 'mlpipe==0\.1\.0': the package index gives the name 'mlpipe'"),
    ("mlpipe-aml", r"lists 'mlpipe-aml' without pinning the version that compiles the "
                   r"pipeline"),
    ("mlpipe-aml==0.0.9", r"pins mlpipe-aml 0\.0\.9, but the pipeline is compiled by "
                          r"mlpipe-aml " + __version__.replace(".", r"\.")),
    (f"mlpipe-aml=={__version__}", None),
    (f"./dist/mlpipe_aml-{__version__}-py3-none-any.whl", None),
    (f"mlpipe-aml[tabular]=={__version__}", None),
])
def test_the_runtime_is_ours_at_the_compiling_version(tmp_path, runtime, match):
    found = _found(tmp_path, ([runtime] if runtime else []) + NEEDS)
    if match is None:
        assert found == []
        return
    assert [(d.code, d.step) for d in found] == [("MP631", "fit")]
    assert found[0].message.startswith("step 'fit' runs its body with `python -m "
                                       "mlpipe.runtime.step` in environment 'fit-env'")
    assert re.search(match, found[0].message), found[0].message
    # the line to add cannot pick up the other project
    assert f'"{DISTRIBUTION}=={__version__}"' in found[0].hint


@pytest.mark.parametrize(("drop", "port", "match", "line"), [
    ("pyarrow>=14", "rows", r"'fit\.rows' declares tabular-schema:rows, whose validation "
                            r"imports pyarrow, but the conda file of environment 'fit-env' "
                            r"\(env\.yml\) installs no pyarrow or pyarrow-core", "pyarrow>=14"),
    ("pint>=0.24", "rows", r"whose validation imports pint, but .* installs no pint",
     "pint>=0.24"),
    ("mlflow>=2.16,<2.19", "model", r"'fit\.model' declares mlflow-model:m, whose validation "
                                    r"imports mlflow, but .* installs no mlflow:",
     "mlflow>=2.16,<2.19"),
])
def test_each_validator_need_missing_is_named_with_its_line(tmp_path, drop, port, match, line):
    found = _found(tmp_path, [runtime_line()] + [n for n in NEEDS if n != drop])
    assert [(d.code, d.step, d.port) for d in found] == [("MP634", "fit", port)]
    assert re.search(match, found[0].message), found[0].message
    assert found[0].hint == f'add "{line}" to the conda file\'s pip dependencies'


def test_mlflow_skinny_does_not_load_a_model(tmp_path):
    pip = [runtime_line(), "pyarrow>=14", "pint>=0.24", "mlflow-skinny>=2.16,<2.19",
           "azureml-mlflow>=1.57"]
    found = _found(tmp_path, pip)
    assert [d.code for d in found] == ["MP634"]
    assert "(it lists mlflow-skinny, which cannot load a model" in found[0].message


@pytest.mark.parametrize(("client", "plugin", "match"), [
    ("mlflow", True, r"lists 'mlflow', which lets pip install MLflow 2\.19 or later"),
    ("mlflow>=2.16", True, r"lists 'mlflow>=2\.16', which lets pip install MLflow 2\.19"),
    ("mlflow==2.21.0", True, r"lists 'mlflow==2\.21\.0', which lets pip install"),
    ("mlflow<2.20", True, r"lists 'mlflow<2\.20'"),
    ("mlflow~=2.19", True, r"lists 'mlflow~=2\.19'"),
    ("mlflow>=2.16,<2.19", False, r"lists 'mlflow>=2\.16,<2\.19' but not azureml-mlflow"),
    ("mlflow>=2.16,<2.19", True, None),
    ("mlflow==2.18.0", True, None),
    ("mlflow<=2.18.9", True, None),
    ("mlflow~=2.18.0", True, None),
])
def test_the_mlflow_client_is_one_the_workspace_accepts(tmp_path, client, plugin, match):
    pip = [runtime_line(), "pyarrow>=14", "pint>=0.24", client] + (
        ["azureml-mlflow>=1.57"] if plugin else [])
    found = _found(tmp_path, pip, codes=("MP635",))
    if match is None:
        assert found == []
        return
    assert [d.code for d in found] == ["MP635"]
    assert re.search(match, found[0].message), found[0].message


@pytest.mark.parametrize(("line", "name", "pin", "listing"), [
    ("mlpipe-aml==0.1.0", "mlpipe-aml", "0.1.0", (True, "0.1.0")),
    ("Mlpipe_AML === 0.1.0", "mlpipe-aml", "0.1.0", (True, "0.1.0")),
    ("mlpipe-aml=0.1.0", "mlpipe-aml", "0.1.0", (True, "0.1.0")),  # conda's form
    ("mlpipe-aml[tabular]>=0.1", "mlpipe-aml", None, (True, None)),
    ("/w/mlpipe_aml-0.1.0-py3-none-any.whl", "mlpipe-aml", "0.1.0", (True, "0.1.0")),
    ("git+https://example.org/mlpipe.git#egg=mlpipe-aml", "mlpipe-aml", None, (True, None)),
    ("mlpipe", "mlpipe", None, (False, None)),
    ("mlpipe==0.1.17", "mlpipe", "0.1.17", (False, "0.1.17")),
    ("mlpipe-extras", "mlpipe-extras", None, None),
    ("conda-forge::pyarrow=14.0", "pyarrow", "14.0", None),
    ("-r requirements.txt", None, None, None),
    ("# a comment", None, None, None),
])
def test_what_a_requirement_line_installs(line, name, pin, listing):
    assert (requirement_name(line), pinned_version(line), runtime_listing(line)) == (
        name, pin, listing)


def test_an_environment_with_every_need_checks_clean(tmp_path):
    assert runtime_line() == f"mlpipe-aml=={__version__}"
    assert _found(tmp_path, [runtime_line(), *NEEDS], codes=("MP631", "MP632", "MP634",
                                                                "MP635")) == []


def test_under_a_python_mlflow_219_does_not_install_on_an_unpinned_client_is_not_rejected(
        tmp_path):
    # MLflow 2.19's Requires-Python is >=3.9: on python=3.8 pip resolves an older client
    module = tmp_path / f"{tmp_path.name.replace('-', '_')}.py"
    module.write_text(PIPELINE)
    for python, codes in (("3.8", []), ("3.11", ["MP635"])):
        (tmp_path / "env.yml").write_text(
            f"dependencies:\n  - python={python}\n  - pip:\n      - {runtime_line()}\n"
            + "".join(f"      - {n}\n" for n in ["pyarrow>=14", "pint>=0.24", "mlflow",
                                                   "azureml-mlflow>=1.57"]))
        spec, _ = load_spec(f"{module}:p")
        assert [d.code for d in check_pipeline(spec)[1] if d.code == "MP635"] == codes, python


def test_a_user_contract_needs_the_distribution_its_install_hint_names(tmp_path):
    module = tmp_path / f"{tmp_path.name.replace('-', '_')}.py"
    module.write_text('''
from mlpipe import Environment, Input, Output, component, pipeline
from mlpipe.contracts import Contract


class Embeddings(Contract):
    kind = "embeddings"
    requires = (("sklearn", "pip install 'scikit-learn>=1.4'"),)


@component(environment=Environment("e", version="1", conda_file="env.yml"))
def embed(data: Input["uri_folder"], vectors: Output[Embeddings()]):
    pass


@pipeline
def p(data):
    return embed(data=data).vectors
''')
    for listed, found in (("numpy", ["MP634"]), ("scikit-learn==1.5.2", []), ("sklearn", [])):
        (tmp_path / "env.yml").write_text(f"dependencies:\n  - python=3.11\n  - pip:\n"
                                          f"      - {runtime_line()}\n      - {listed}\n")
        spec, _ = load_spec(f"{module}:p")
        diagnostics = [d for d in check_pipeline(spec)[1] if d.code == "MP634"]
        assert [d.code for d in diagnostics] == found, listed
        if found:
            assert diagnostics[0].hint == ("add \"scikit-learn>=1.4\" to the conda file's pip "
                                           "dependencies")
            assert "installs no scikit-learn or sklearn" in diagnostics[0].message


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(st.text(alphabet="mlpipe-aflowr0123456789.=<>!~,[]_:/ @;#*", max_size=24),
                      max_size=6))
def test_no_requirement_line_makes_a_check_crash(tmp_path, lines):
    module = tmp_path / f"{tmp_path.name.replace('-', '_')}.py"
    module.write_text(PIPELINE)
    (tmp_path / "env.yml").write_text(yaml.safe_dump(
        {"dependencies": ["python=3.11", {"pip": lines}]}))
    spec, _ = load_spec(f"{module}:p")
    assert "MP001" not in {d.code for d in check_pipeline(spec)[1]}
    for line in lines:  # and each reading of a line is total
        requirement_name(line), pinned_version(line), runtime_listing(line)


@pytest.mark.parametrize(("runtime", "rest", "codes"), [
    # the runtime's own extras install what the validators need (from mlpipe-aml's metadata)
    (f"mlpipe-aml[tabular,models]=={__version__}", ["azureml-mlflow>=1.57"], []),
    (f"mlpipe-aml[tabular]=={__version__}", ["azureml-mlflow>=1.57"], ["MP634"]),  # no mlflow
    (f"mlpipe-aml[tabular,azureml]=={__version__}", ["mlflow>=2.16,<2.19"], []),
    (f"mlpipe-aml[tabular]=={__version__}", ["mlflow>=2.16,<2.19"], ["MP635"]),  # no plugin
])
def test_the_runtime_extras_count_as_what_they_install(tmp_path, runtime, rest, codes):
    assert [d.code for d in _found(tmp_path, [runtime, *rest])] == codes


ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("pipeline", ["defect_classifier.py", "defect_classifier_ddp.py"])
def test_the_examples_declared_environments_are_read_and_clean(pipeline):
    from mlpipe.checks.environment import conda_of

    graph, found = check_pipeline(load_spec(str(ROOT / "pipelines" / pipeline))[0])
    # each step's registered environment is read from the project's declaration of it
    read = {sid: conda_of(node) for sid, node in graph.steps.items()}
    assert all(c is not None and c[1].startswith("environments/defect-")
               for c in read.values()), read
    assert [d for d in found if d.code in ("MP631", "MP632", "MP634", "MP635")] == []


def test_a_registered_environment_the_project_declares_is_checked_for_its_needs(tmp_path):
    """Environment("fit-env", version="1") with no conda file: the YAML in environments/
    (what `az ml environment create --file` registers) says which conda file builds it."""
    module = tmp_path / "steps" / "registered_fit.py"
    module.parent.mkdir()
    module.write_text(PIPELINE.replace('conda_file="env.yml"', ""))
    (tmp_path / "environments").mkdir()
    (tmp_path / "environments" / "fit.yml").write_text(
        "name: fit-env\nversion: 1\nimage: mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu22.04\n"
        "conda_file: fit.conda.yml\n")
    (tmp_path / "environments" / "fit.conda.yml").write_text(
        f"dependencies:\n  - python=3.11\n  - pip:\n      - {runtime_line()}\n"
        "      - pyarrow>=14\n      - pint>=0.24\n      - azureml-mlflow>=1.57\n")
    found = [d for d in check_pipeline(load_spec(f"{module}:p")[0])[1]
             if d.code in ("MP631", "MP634", "MP635")]
    assert [d.code for d in found] == ["MP634"]
    assert ("the conda file of environment 'fit-env' (environments/fit.conda.yml) installs "
            "no mlflow") in found[0].message
