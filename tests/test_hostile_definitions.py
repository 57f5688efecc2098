"""Definitions that cannot work, each one clear line: a pipeline body that exits, choices of the
wrong type, a pipeline file named like a module Python already has, a generator body that the
step runtime refuses when its check was ignored. Real CLI processes, real step processes."""
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from mlpipe import Input, Output, Param, component, pipeline
from mlpipe.errors import DefinitionError

STEP = textwrap.dedent('''
    from pathlib import Path
    from mlpipe import Input, Output, component, pipeline


    @component
    def copy(src: Input["uri_file"], out: Output["uri_file"]):
        Path(out).write_text(Path(src).read_text())


    @pipeline
    def copied(src):
        return {"out": copy(src=src).out}
''')


def cli(folder: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("MLPIPE_STORE_URL", "MLPIPE_HOME")}
    mlpipe = Path(sys.executable).with_name("mlpipe")  # the console script: no cwd on sys.path
    return subprocess.run([str(mlpipe), *args], cwd=folder, env=env, capture_output=True,
                          text=True, timeout=120)


def test_a_pipeline_body_that_calls_sys_exit_is_a_definition_error():
    @pipeline
    def leaves(src):
        sys.exit(3)

    with pytest.raises(DefinitionError, match=r"pipeline 'leaves' called sys.exit\(3\) while "
                                              r"being traced\n  help: a pipeline function only "
                                              r"wires steps; do not exit from it$"):
        leaves.spec


@pytest.mark.parametrize("typ, choices, said", [
    (str, ["a", 1], "choice 1 of Param[str, [...]] is an int, not a str; every choice must be "
                    "a str"),
    (int, [1, True], "choice True of Param[int, [...]] is a bool, not an int; every choice "
                     "must be an int"),
    (float, [0.5, "1"], "choice '1' of Param[float, [...]] is a str, not a float; every choice "
                        "must be a float"),
])
def test_a_choice_of_another_type_is_refused(typ, choices, said):
    with pytest.raises(DefinitionError, match=f"parameter 'mode' of component 'pick': "
                                              f"{re.escape(said)}$"):
        @component
        def pick(src: Input["uri_file"], out: Output["uri_file"],
                 mode: Param[typ, choices] = choices[0]):
            pass

        pick.spec


def test_int_choices_for_a_float_are_accepted():
    @component
    def pick(src: Input["uri_file"], out: Output["uri_file"], rate: Param[float, [1, 0.5]] = 1):
        pass

    assert pick.spec.param("rate").choices == (1, 0.5)


@pytest.mark.slow
@pytest.mark.parametrize("name, what", [
    ("json", "Python's standard library"),
    ("yaml", "an installed package"),
])
def test_a_pipeline_file_named_like_a_module_python_has_is_refused(tmp_path, name, what):
    (tmp_path / f"{name}.py").write_text(STEP)
    result = cli(tmp_path, "check", f"{name}.py")
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert lines[0].startswith(f"error: {name}.py: {name}.py has the name of the module "
                               f"{name!r} of {what}")
    assert lines[0].endswith("; importing it would find that module instead, and a step "
                             "process would hide the real one from mlpipe")
    assert lines[1:] == [f"  help: rename the file (e.g. {name}_pipeline.py)"]


@pytest.mark.slow
def test_a_generator_body_run_anyway_fails_instead_of_succeeding_empty(tmp_path):
    (tmp_path / "gen.py").write_text(STEP.replace(
        "Path(out).write_text(Path(src).read_text())", "yield Path(src).read_text()"))
    (tmp_path / "in.txt").write_text("1")
    checked = cli(tmp_path, "check", "gen.py")
    assert checked.returncode == 1
    assert "error[MP960] component-body-never-runs: component 'copy' (step 'copy') is a " \
           "generator function (it yields)" in checked.stdout
    refused = cli(tmp_path, "submit", "gen.py", "--input", "src=in.txt")
    assert refused.returncode == 1 and "MP960" in refused.stderr
    ran = cli(tmp_path, "submit", "gen.py", "--input", "src=in.txt", "--ignore", "MP960")
    assert ran.returncode == 1
    assert "TypeError: the component's function returned 'generator' without running its " \
           "body (a generator or async def; see MP960)" in ran.stderr


@pytest.mark.parametrize("name, value, kind", [
    ("region", "AKIAIOSFODNN7EXAMPLE", "an AWS access key id"),
    ("x", "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB", "a GitHub token"),
    ("x", "postgresql://user:S3CRET@db.example/x", "a URL with a password"),
    ("conn", "DefaultEndpointsProtocol=https;AccountName=a;AccountKey=" + "A" * 40,
     "a storage connection string with its key"),
    ("db_password", "hunter2hunter2", "a password or token (by its name)"),
    ("API_KEY", "0123456789abcdef", "a password or token (by its name)"),
])
def test_credential_looking_values_are_named(name, value, kind):
    from mlpipe.checks.credentials import credential_kind

    assert credential_kind(name, value) == kind


@pytest.mark.parametrize("name, value", [
    ("epochs", "20"), ("author", "Ada Lovelace"), ("db_password", ""),
    ("api_key", "<your key>"), ("token", "${{secrets.TOKEN}}"), ("password", "changeme"),
    ("url", "https://example.org/data.csv"), ("secret_name", 5),
])
def test_values_that_are_no_credential_are_not_named(name, value):
    from mlpipe.checks.credentials import credential_kind

    assert credential_kind(name, value) is None


@pytest.mark.slow
def test_a_credential_looking_param_at_submit_warns_and_ignore_silences_it(tmp_path):
    (tmp_path / "p.py").write_text(STEP.replace("def copied(src):", "def copied(src, note=''):")
                                   .replace('"out": copy(src=src).out', '"out": copy(src=src).out'))
    (tmp_path / "in.txt").write_text("1")
    warned = cli(tmp_path, "submit", "p.py", "--input", "src=in.txt", "--param",
                 "note=AKIAIOSFODNN7EXAMPLE")
    assert warned.stderr.splitlines()[:2] == [
        "warning[MP961] credential-in-recorded-value: --param note looks like an AWS access key "
        "id; parameter values are recorded in clear (store, bundle, export)",
        "  help: declare the parameter Param[Secret] and give the value when submitting "
        "(--secret NAME=ENV_VAR): it is then recorded only as a keyed hash (or let the step read "
        "it from a secret store at run time); rotate it if it was recorded"]
    quiet = cli(tmp_path, "submit", "p.py", "--input", "src=in.txt", "--param",
                "note=AKIAIOSFODNN7EXAMPLE", "--ignore", "MP961")
    assert "MP961" not in quiet.stderr
