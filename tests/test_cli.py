"""The command line: what users see, and the exit codes 0 / 1 / 2."""
import json
import os
import subprocess
import sys
import textwrap

import pytest
from click.testing import CliRunner

from golden_files import assert_golden
from mlpipe.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTS = os.path.join(ROOT, "tests")


def run(args, cwd=ROOT):
    old = os.getcwd()
    os.chdir(cwd)
    try:
        return CliRunner().invoke(main, args, catch_exceptions=False)
    finally:
        os.chdir(old)


def test_check_clean_pipeline_exits_0():
    result = run(["check", "pipelines/defect_classifier.py"])
    assert (result.exit_code, result.output) == (0, "No problems found.\n")


def test_check_reports_like_a_linter_and_exits_1():
    result = run(["check", "fixtures/checks/mp301.py:bad"], cwd=TESTS)
    assert result.exit_code == 1
    assert_golden("check_mp301.txt", result.output)


def test_check_json_lists_every_field():
    result = run(["check", "fixtures/checks/mp301.py:bad", "--format", "json"], cwd=TESTS)
    assert result.exit_code == 1
    [d] = json.loads(result.output)
    assert d == {
        "code": "MP301", "name": "artifact-kind-mismatch", "severity": "error",
        "step": "compare", "port": "b", "from": "score.report", "to": "compare.b",
        "file": "fixtures/checks/mp301.py", "line": 9,
        "message": "'compare.b' expects uri_folder but 'score.report' produces uri_file",
        "hint": "a uri_file output can feed uri_file inputs; change the kind of one of the two "
                "ports, or add a step that converts it"}


def test_warnings_alone_exit_0():
    result = run(["check", "fixtures/checks/mp105.py:bad"], cwd=TESTS)
    assert result.exit_code == 0
    assert result.output.endswith("Found 1 problem (0 errors, 1 warning, 0 info).\n")


@pytest.mark.parametrize(("target", "fail_on", "code"), [
    ("fixtures/checks/mp105.py:bad", "error", 0),    # one warning
    ("fixtures/checks/mp105.py:bad", "warning", 1),
    ("fixtures/checks/mp105.py:bad", "info", 1),
    ("fixtures/checks/mp107.py:bad", "warning", 0),  # one info
    ("fixtures/checks/mp107.py:bad", "info", 1),
    ("fixtures/checks/mp301.py:bad", "error", 1),    # one error
])
def test_fail_on_is_the_rule_submit_gates_on(target, fail_on, code):
    from mlpipe.evidence.qualification.gate import FAILING

    result = run(["check", target, "--fail-on", fail_on, "--format", "json"], cwd=TESTS)
    severities = {d["severity"] for d in json.loads(result.output)}
    assert result.exit_code == code
    assert bool(severities & set(FAILING[fail_on])) is bool(code)


@pytest.fixture
def project(tmp_path):
    def write(name, source):
        path = tmp_path / name
        path.write_text(textwrap.dedent(source))
        return path
    return write


def test_syntax_error_names_file_and_line(project, tmp_path):
    project("broken.py", "from mlpipe import pipeline\n\ndef oops(:\n    pass\n")
    result = run(["check", "broken.py"], cwd=tmp_path)
    assert result.exit_code == 2
    assert result.output == "error: broken.py:3: syntax error: invalid syntax\n  help: fix the syntax and run again\n"


def test_import_error_names_the_user_line(project, tmp_path):
    project("bad_import.py", "import os\nimport no_such_module_here\n")
    result = run(["check", "bad_import.py"], cwd=tmp_path)
    assert result.exit_code == 2
    assert result.output.startswith("error: bad_import.py:2: importing bad_import.py raised "
                                    "ModuleNotFoundError: No module named 'no_such_module_here'")


def test_definition_error_in_the_file_exits_2_with_its_location(project, tmp_path):
    project("defs.py", """\
        from mlpipe import component, pipeline, Output

        @component
        def make(out: Output["uri_file"] = None):
            pass
        """)
    result = run(["check", "defs.py"], cwd=tmp_path)
    assert result.exit_code == 2
    assert result.output.startswith("error: defs.py:4: output 'out' of component 'make' has a "
                                    "default (None)")


@pytest.mark.parametrize("target, message", [
    ("missing.py", "error: missing.py: no such file: missing.py\n"),
    ("notes.txt", "error: notes.txt: notes.txt is not a Python file\n"),
    ("empty.py", "error: empty.py: empty.py defines no @pipeline\n"),
    ("two.py", "error: two.py: two.py defines 2 pipelines: a, b\n  help: choose one: two.py:a\n"),
    ("two.py:c", "error: two.py: two.py has no @pipeline named 'c' (pipelines: a, b)\n"),
])
def test_load_failures_exit_2(project, tmp_path, target, message):
    project("notes.txt", "hello")
    project("empty.py", "x = 1\n")
    project("two.py", """\
        from mlpipe import pipeline

        @pipeline
        def a():
            pass

        @pipeline
        def b():
            pass
        """)
    result = run(["check", target], cwd=tmp_path)
    assert result.exit_code == 2
    assert result.output.startswith(message)


def test_graph_formats():
    for fmt, start in [("text", "pipeline defect-classifier  (3 steps)"),
                       ("dot", 'digraph "defect-classifier" {'), ("mermaid", "flowchart LR")]:
        result = run(["graph", "pipelines/defect_classifier.py", "--format", fmt])
        assert result.exit_code == 0
        assert result.output.startswith(start)


def test_unknown_format_is_a_usage_error():
    result = run(["graph", "pipelines/defect_classifier.py", "--format", "png"])
    assert result.exit_code == 2
    assert "Invalid value for '--format'" in result.output


@pytest.mark.slow
def test_real_process_exit_codes_and_streams():
    cli = [sys.executable, "-m", "mlpipe.cli"]
    ok = subprocess.run([*cli, "check", "pipelines/defect_classifier.py"], cwd=ROOT,
                        capture_output=True, text=True)
    assert (ok.returncode, ok.stdout, ok.stderr) == (0, "No problems found.\n", "")
    bad = subprocess.run([*cli, "check", "fixtures/checks/mp102.py:bad"], cwd=TESTS,
                         capture_output=True, text=True)
    assert bad.returncode == 1 and "error[MP102] required-input-unbound" in bad.stdout
    missing = subprocess.run([*cli, "check", "nope.py"], cwd=ROOT, capture_output=True, text=True)
    assert (missing.returncode, missing.stdout) == (2, "")
    assert missing.stderr.startswith("error: nope.py: no such file")
    assert "Traceback" not in missing.stderr


def test_select_and_ignore_codes():
    ignored = run(["check", "fixtures/checks/mp107.py:bad", "--ignore", "mp107"], cwd=TESTS)
    assert (ignored.exit_code, ignored.output) == (0, "No problems found.\n")
    selected = run(["check", "fixtures/checks/mp102.py:bad", "--select", "MP107"], cwd=TESTS)
    assert selected.output == "No problems found.\n" and selected.exit_code == 0
    unknown = run(["check", "pipelines/defect_classifier.py", "--ignore", "MP999"])
    assert unknown.exit_code == 2
    assert "unknown code(s) MP999; codes are listed in docs/checks.md" in unknown.output


def test_each_command_s_family_is_the_module_that_defines_it():
    """``base.FAMILIES`` names the module of every command (imported when the command is run);
    a command added to a module and not to the table, or listed under another, fails here."""
    import importlib
    import pkgutil

    import mlpipe.cli
    from mlpipe.cli.base import FAMILIES

    for info in pkgutil.iter_modules(mlpipe.cli.__path__):
        if info.name != "__main__":  # runs the command line
            importlib.import_module(f"mlpipe.cli.{info.name}")
    defined = {name: command.callback.__module__.rsplit(".", 1)[1]
               for name, command in main.commands.items()}
    assert defined == FAMILIES


def test_a_command_imports_its_own_family_only():
    code = ("import sys; sys.argv = ['mlpipe', 'runs', '--help']\n"
            "from mlpipe.cli import main\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.startswith('mlpipe.cli.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=ROOT).stdout.splitlines()[-1]
    # running's submit takes azure's options (--target azure)
    assert out == str(["mlpipe.cli.azure", "mlpipe.cli.base", "mlpipe.cli.running"])
