"""Property: whatever a user types or writes, mlpipe answers in bounded time with an exit
status and a message, never a traceback. Hypothesis generates command lines (commands, their
options, hostile values) and Azure ML YAML documents (the job vocabulary filled with wrong
shapes, names that are paths, deep nesting, arbitrary bytes), run through the real CLI."""
from __future__ import annotations

import contextlib
import signal
import string

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mlpipe.cli import main

pytestmark = pytest.mark.slow

SECONDS_PER_CASE = 20
COMMANDS = ["check", "graph", "validate", "runs", "show", "diff", "candidates", "evidence",
            "submit", "logs", "store", "qualify", "review", "gc"]
OPTIONS = ["--format", "--limit", "--input", "--param", "--ignore", "--fail-on", "--verify",
           "--max-parallel", "--local-scale", "--target", "--no-reuse", "--why", "--rebuild",
           "--explain", "-h"]
HOSTILE = ["-1", "nan", "inf", "", " ", "=", "a=", "=b", "x=nan", "ratio=-inf", "/", "/dev/zero",
           "fifo", "pipe.yml", "p.py", "p.py:nothing", "json.py", "..", "../../etc/passwd",
           "\x1b[31mred", "c-", "r-", "MP960", "mp999", "json", "text", "9" * 30, "é", "\t"]


@contextlib.contextmanager
def bounded(seconds: int):
    def stop(_signum, _frame):
        raise TimeoutError(f"no answer within {seconds} s")
    previous = signal.signal(signal.SIGALRM, stop)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def answered(args: list[str]) -> None:
    with bounded(SECONDS_PER_CASE):
        result = CliRunner().invoke(main, args)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"mlpipe {args!r} raised {result.exception!r}") \
            from result.exception
    assert result.exit_code in (0, 1, 2), (args, result.exit_code, result.output)
    assert "Traceback" not in result.output, (args, result.output)


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLPIPE_STORE_URL", raising=False)
    monkeypatch.delenv("MLPIPE_HOME", raising=False)
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "run.py").write_text("print(1)\n")
    (tmp_path / "n.txt").write_text("1")
    (tmp_path / "p.py").write_text(
        "from pathlib import Path\nfrom mlpipe import Input, Output, Param, component, "
        "pipeline\n\n\n@component\ndef scale(src: Input['uri_file'], out: Output['uri_file'], "
        "ratio: Param[float, 0.0:1.0] = 0.5):\n    Path(out).write_text('1')\n\n\n@pipeline\n"
        "def p(src, ratio: float = 0.5):\n    return {'out': scale(src=src, ratio=ratio).out}\n")
    return tmp_path


words = st.one_of(st.sampled_from(OPTIONS), st.sampled_from(HOSTILE),
                  st.text(string.printable, max_size=12))


@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(command=st.sampled_from(COMMANDS), rest=st.lists(words, max_size=6))
def test_any_command_line_gets_an_answer_not_a_traceback(project, command, rest):
    if command == "submit" and "--target" in rest:
        rest = [w for w in rest if w != "--target"]  # Azure needs a workspace, not in scope
    answered([command, *rest])


AZURE_KEYS = ["type", "jobs", "inputs", "outputs", "command", "code", "component",
              "environment", "compute", "settings", "distribution", "resources", "path",
              "default", "min", "max", "enum", "optional", "mode", "display_name", "name"]
NAMES = st.one_of(st.sampled_from(["a", "train", "src", "out", "o/../../ESCAPED", "../evil",
                                   "2x", "s rc", "", "jobs", "${{parent.inputs.a}}"]),
                  st.from_regex(r"[a-z_]{1,6}", fullmatch=True))
SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 5), st.floats(allow_nan=True),
    st.sampled_from(["pipeline", "command", "uri_file", "uri_folder", "integer", "number",
                     "string", "boolean", "mlflow_model", "./src", "/", ".", "azureml:e:1",
                     "${{parent.inputs.a}}", "${{parent.jobs.a.outputs.out}}",
                     "${{inputs.src}}", "${{outputs.out}}", "python run.py", "./n.txt",
                     "./missing.yml", "cp ${{inputs.src}} ${{outputs.out}}"]))
DOCS = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(st.one_of(st.sampled_from(AZURE_KEYS), NAMES),
                                            inner, max_size=5)),
    max_leaves=30)
PIPELINES = st.fixed_dictionaries(
    {"type": st.sampled_from(["pipeline", "command", None, "sweep"])},
    optional={"jobs": st.one_of(DOCS, st.dictionaries(NAMES, DOCS, max_size=3)),
              "inputs": DOCS, "outputs": DOCS, "command": DOCS, "code": SCALARS,
              "settings": DOCS, "component": DOCS})


@settings(max_examples=100, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(doc=st.one_of(PIPELINES, DOCS))
def test_any_yaml_document_gets_an_answer_not_a_traceback(project, doc):
    (project / "p.yml").write_text(yaml.safe_dump(doc, allow_unicode=True))
    answered(["check", "p.yml"])


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.one_of(st.binary(max_size=200),
                      st.integers(1, 6000).map(lambda n: ("a: " + "[" * n + "]" * n).encode()),
                      st.integers(1, 3000).map(lambda n: "".join(
                          f"{'  ' * i}k{i}:\n" for i in range(n)).encode())))
def test_any_bytes_as_yaml_get_an_answer_not_a_traceback(project, data):
    (project / "p.yml").write_bytes(data)
    answered(["check", "p.yml"])
