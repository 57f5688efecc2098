"""submit's options, checked in the layer they belong to (mlpipe.backends.{local,azure}.options,
mlpipe.secret.from_environment, mlpipe.checks.credentials): the CLI only parses and renders."""
from __future__ import annotations

import pytest

from mlpipe.backends.azure import options as azure
from mlpipe.backends.local import options
from mlpipe.errors import UsageError
from mlpipe.secret import Secret, from_environment


def test_local_scales_are_parsed_and_a_bad_one_is_one_message():
    assert options.local_scales({"a": "2x3", "b": " fit "}) == {"a": (2, 3), "b": "fit"}
    with pytest.raises(UsageError, match=r"--local-scale a=2by2 is not NODESxPROCESSES or fit"):
        options.local_scales({"a": "2by2"})


def test_a_parameter_given_by_param_and_by_secret_is_refused():
    assert options.local_params({"a": "1"}, {"b": Secret("x")}) == {"a": "1", "b": "x"}
    with pytest.raises(UsageError, match=r"'b' is given both by --param and by --secret"):
        options.local_params({"b": "1"}, {"b": Secret("x")})


def test_azure_options_refuse_local_ones_and_a_poll_interval_without_wait():
    assert azure.azure_poll_interval(no_reuse=False, max_parallel=None, local_scale=False,
                                       isolate=False, wait=True, poll_interval=None) == 15.0
    with pytest.raises(UsageError, match=r"--no-reuse, --max-parallel, --local-scale and "
                                         r"--isolate apply to --target local only"):
        azure.azure_poll_interval(no_reuse=False, max_parallel=2, local_scale=False,
                                    isolate=False, wait=False, poll_interval=None)
    with pytest.raises(UsageError, match=r"--poll-interval applies to --wait only"):
        azure.azure_poll_interval(no_reuse=False, max_parallel=None, local_scale=False,
                                    isolate=False, wait=False, poll_interval=3.0)
    with pytest.raises(UsageError, match=r"--secret applies to --target local only"):
        azure.no_secrets_to_azure(True)
    azure.no_secrets_to_azure(False)


def test_azure_flags_on_a_local_run_are_named():
    options.check_local([])
    with pytest.raises(UsageError, match=r"^--experiment, --workspace apply to --target azure"):
        options.check_local(["--workspace", "--experiment"])


def test_a_secret_is_read_once_from_its_variable(monkeypatch):
    monkeypatch.setenv("H29C_TOKEN", "s3cr3t")
    found = from_environment({"token": " H29C_TOKEN "})
    assert found == {"token": "s3cr3t"} and isinstance(found["token"], Secret)
    import os

    assert "H29C_TOKEN" not in os.environ  # the steps do not inherit it
    with pytest.raises(UsageError, match=r"the environment variable H29C_TOKEN is not set"):
        from_environment({"token": "H29C_TOKEN"})
    with pytest.raises(UsageError, match=r"what follows '=' is not the name of an environment "
                                         r"variable") as err:
        from_environment({"token": "hunter2!"})
    assert "hunter2" not in str(err.value)  # what was typed may be the secret itself


def test_credential_looking_params_are_mp961_diagnostics():
    from mlpipe.checks.credentials import submitted_credentials

    found = submitted_credentials({"note": "AKIAIOSFODNN7EXAMPLE", "epochs": "3",
                                   "token": Secret("AKIAIOSFODNN7EXAMPLE")})
    assert [d.render().splitlines()[0] for d in found] == [
        "warning[MP961] credential-in-recorded-value: --param note looks like an AWS access key "
        "id; parameter values are recorded in clear (store, bundle, export)"]
