"""Moving references and parameters that name data: the rules behind MP205 and MP801-MP803."""
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mlpipe.checks import check_pipeline
from mlpipe.checks.reproducibility import _names_data
from mlpipe.references import data_reference_moves, image_moves, is_url

DIGEST = "sha256:" + "0" * 64


@pytest.mark.parametrize("reference, why", [
    ("azureml:images@latest", "the label 'latest' names whichever version carries it"),
    ("azureml:images@prod", "the label 'prod' names whichever version carries it"),
    ("azureml:images", "a data asset named without a version resolves to its latest version"),
    ("azureml:images:latest", "version 'latest' names whichever version is newest"),
    ("azureml://subscriptions/s/resourcegroups/g/workspaces/w/data/images/versions/latest",
     "version 'latest' names whichever version is newest"),
    ("azureml://datastores/blob/paths/images/", "a datastore path"),
    ("https://example.org/data.csv", "a https:// location"),
    ("abfss://c@acct.dfs.core.windows.net/x", "a abfss:// location"),
])
def test_moving_data_references_say_why(reference, why):
    assert why in data_reference_moves(reference)


@pytest.mark.parametrize("reference", [
    "azureml:images:3",
    "azureml://subscriptions/s/resourcegroups/g/workspaces/w/data/images/versions/3",
    "data/raw", "/abs/path/raw", "C:/data",
])
def test_pinned_and_local_references_do_not_move(reference):
    assert data_reference_moves(reference) is None


@pytest.mark.parametrize("image, why", [
    ("python", "no tag means 'latest'"),
    ("python:latest", "tag 'latest' is moved"),
    ("mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu22.04:20250101", "tag '20250101' can be pushed"),
    ("localhost:5000/train", "no tag means 'latest'"),
])
def test_image_tags_move(image, why):
    assert why in image_moves(image)


def test_an_image_pinned_by_digest_does_not_move():
    assert image_moves(f"mcr.microsoft.com/azureml/openmpi@{DIGEST}") is None
    assert image_moves(f"python:3.11@{DIGEST}") is None


@pytest.mark.parametrize("value, what", [
    (__file__, "an existing file"),
    ("tests", "an existing folder"),
    ("https://example.org/rates.csv", "a URL"),
    ("azureml:rates:2", "an Azure ML data asset"),
])
def test_parameter_values_that_name_data(value, what):
    assert _names_data(value) == what


@pytest.mark.parametrize("value", ["adam", "/", ".", "", "~", ",", 3, 0.5, None, True,
                                   "no/such/file.csv", "x" * 5000, "a\x00b"])
def test_parameter_values_that_name_no_data(value):
    assert _names_data(value) is None


def test_unversioned_environments_are_reported_once_naming_every_step():
    from fixtures.checks.mp801 import fit_bad
    from mlpipe import pipeline

    @pipeline
    def two(data):
        a = fit_bad(data=data)
        b = fit_bad(data=data).named("again")
        return {"a": a.model, "b": b.model}

    found = [d for d in check_pipeline(two.spec)[1] if d.code == "MP801"]
    assert [d.step for d in found] == ["fit_bad"]
    assert found[0].message.startswith("environment 'sklearn-env' of steps 'fit_bad', 'again' "
                                       "has no version: Azure ML resolves it as "
                                       "azureml:sklearn-env@latest")
    assert found[0].hint == 'pin it: Environment("sklearn-env", version="N")'


def test_a_data_asset_label_names_the_pinned_form_in_its_hint():
    from fixtures.checks import mp802_data
    [d] = [d for d in check_pipeline(mp802_data.bad.spec)[1] if d.code == "MP802"]
    assert d.message == ("input 'fit.data' is bound to 'azureml:defect-images@latest': the label "
                         "'latest' names whichever version carries it when the job is submitted")
    assert d.hint == "pin a version: azureml:defect-images:N"
    assert (d.step, d.port) == ("fit", "data")


def test_is_url():
    assert is_url("https://x") and is_url("azureml:x:1") and not is_url("data/x.csv")


REGISTRY_SKLEARN = "azureml://registries/azureml/environments/sklearn-1.5"


@pytest.mark.parametrize("name, codes, hint", [
    # the version or label an environment's name carries is its version (issue 35)
    ("azureml:sklearn-env:3", [], None),
    (f"{REGISTRY_SKLEARN}/versions/3", [], None),
    ("azureml:sklearn-env@latest", ["MP802"], 'pin a version: Environment("sklearn-env", '
                                              'version="N")'),
    (f"{REGISTRY_SKLEARN}/labels/latest", ["MP802"],
     f'pin a version: Environment("{REGISTRY_SKLEARN}", version="N")'),
    ("sklearn-env", ["MP801"], 'pin it: Environment("sklearn-env", version="N")'),
])
def test_an_environment_name_that_carries_its_version_or_label(name, codes, hint):
    from mlpipe import Environment, Input, Output, component, pipeline

    @component(version="1", environment=Environment(name))
    def fit(data: Input["uri_folder"], model: Output["uri_folder"]):
        """A step."""

    @pipeline
    def one(data):
        return {"model": fit(data=data).model}

    found = [d for d in check_pipeline(one.spec)[1] if d.code in ("MP801", "MP802")]
    assert [d.code for d in found] == codes
    if hint:
        assert found[0].hint == hint
        assert "@latest" not in found[0].hint and "/labels/" not in found[0].hint


@pytest.mark.parametrize("env, identity", [
    (("azureml:sklearn-env:3", None), ("sklearn-env", "3", False)),
    ((f"{REGISTRY_SKLEARN}/versions/3", None), (REGISTRY_SKLEARN, "3", False)),
    (("azureml:sklearn-env@latest", None), ("sklearn-env", "@latest", True)),
    (("sklearn-env", "@prod"), ("sklearn-env", "@prod", True)),
    (("sklearn-env", "4"), ("sklearn-env", "4", False)),
    (("sklearn-env", None), ("sklearn-env", None, True)),
])
def test_the_recorded_environment_reads_the_reference_as_azure_ml_does(env, identity):
    """A run records the version a name carries, and a label as moving (it names whichever
    version carries it at submission)."""
    from mlpipe import Environment
    from mlpipe.environments import environment_identity

    name, version, _, mutable = environment_identity(Environment(env[0], version=env[1]), None)
    assert (name, version, mutable) == identity


_NAMES = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,20}", fullmatch=True)


@given(kind=st.sampled_from(["environments", "components", "models", "data"]), name=_NAMES,
       pinned=st.booleans(), tag=_NAMES, registry=st.one_of(st.none(), _NAMES))
def test_an_asset_reference_reads_back_what_it_writes(kind, name, pinned, tag, registry):
    """Every reference's text (``azureml:NAME:V``, ``azureml:NAME@L``, a registry URI's
    ``/versions/V`` or ``/labels/L``) reads back as the same reference."""
    from mlpipe.references import AssetReference, asset_reference

    ref = AssetReference(kind, name, tag if pinned else None, None if pinned else tag,
                         registry)
    assert asset_reference(ref.text, kind) == ref


@pytest.mark.parametrize("text", [
    "data/raw", "https://example.org/x.csv", "azureml://datastores/blob/paths/x/",
    "azureml://registries/r/environments", "azureml:", "azureml:x:1:2", 3, None,
])
def test_what_is_no_asset_reference(text):
    from mlpipe.references import asset_reference

    assert asset_reference(text) is None
