"""Findings where engineers look: ``check`` and ``submit`` with ``--format github`` (GitHub
Actions workflow commands) and ``--format sarif`` (SARIF 2.1.0), the SARIF validated against
the OASIS standard's own JSON schema (tests/fixtures/sarif/README.md says where it is from)."""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner

from bundle_project import FIXTURE, BundleProject
from mlpipe.cli import main
from mlpipe.cli.codescan import github

TESTS = Path(__file__).parent
SCHEMA = json.loads((TESTS / "fixtures" / "sarif" / "sarif-schema-2.1.0.json").read_text())


def _sarif_errors(log: dict) -> list[str]:
    validator = jsonschema.Draft4Validator(SCHEMA)   # the schema's own $schema: draft-04
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
            for e in validator.iter_errors(log)]


def _check(*args: str):
    old = os.getcwd()
    os.chdir(TESTS)
    try:
        return CliRunner().invoke(main, ["check", *args], catch_exceptions=False)
    finally:
        os.chdir(old)


def test_the_schema_is_the_standard_s_and_it_rejects_what_sarif_forbids():
    assert SCHEMA["id"] == ("https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/"
                            "schemas/sarif-schema-2.1.0.json")
    ok = {"version": "2.1.0", "runs": [{"tool": {"driver": {"name": "x"}}, "results": []}]}
    assert _sarif_errors(ok) == []
    for broken in ({"version": "2.0.0", "runs": ok["runs"]},
                   {"version": "2.1.0", "runs": [{"results": []}]},
                   {"version": "2.1.0", "runs": [{"tool": {"driver": {"name": "x"}},
                                                  "results": [{"message": {"text": "m"},
                                                               "level": "fatal"}]}]}):
        assert _sarif_errors(broken) != []


@pytest.mark.parametrize("target, code, line, level", [
    ("fixtures/checks/mp301.py:bad", "MP301", 9, "error"),
    ("fixtures/checks/mp301.py:good", None, None, None),
])
def test_check_writes_sarif_that_matches_the_standard(target, code, line, level):
    result = _check(target, "--format", "sarif")
    assert result.exit_code == (1 if code else 0)
    log = json.loads(result.output)
    assert _sarif_errors(log) == []
    [run] = log["runs"]
    assert run["tool"]["driver"]["name"] == "mlpipe"
    if code is None:
        assert run["results"] == [] and run["tool"]["driver"]["rules"] == []
        return
    [result] = run["results"]
    assert (result["ruleId"], result["level"], result["ruleIndex"]) == (code, level, 0)
    assert result["locations"] == [{"physicalLocation": {
        "artifactLocation": {"uri": "fixtures/checks/mp301.py", "uriBaseId": "%SRCROOT%"},
        "region": {"startLine": line}}}]
    assert result["message"]["text"].startswith(
        "'compare.b' expects uri_folder but 'score.report' produces uri_file\nhelp: ")
    [rule] = run["tool"]["driver"]["rules"]
    assert (rule["id"], rule["name"], rule["defaultConfiguration"]) == (
        "MP301", "artifact-kind-mismatch", {"level": "error"})
    # the same log with one field corrupted no longer validates
    result["locations"][0]["physicalLocation"]["region"]["startLine"] = 0
    assert _sarif_errors(log) != []


def test_check_writes_github_annotations():
    result = _check("fixtures/checks/mp301.py:bad", "--format", "github")
    assert result.exit_code == 1
    assert result.output == (
        "::error file=fixtures/checks/mp301.py,line=9,title=MP301 artifact-kind-mismatch::"
        "'compare.b' expects uri_folder but 'score.report' produces uri_file%0Ahelp: a "
        "uri_file output can feed uri_file inputs; change the kind of one of the two ports, or "
        "add a step that converts it\n")


def test_annotations_escape_what_the_runner_would_read_as_syntax():
    line = github([{"code": "MP999", "name": "x-y", "severity": "info", "file": "a,b:c.py",
                    "line": 3, "message": "100% of it\r\nsplit: here, there"}])
    assert line == ("::notice file=a%2Cb%3Ac.py,line=3,title=MP999 x-y::100%25 of it%0D%0A"
                    "split: here, there\n")
    assert github([{"code": "MP1", "name": "n", "severity": "warning", "message": "m"}]) == \
        "::warning title=MP1 n::m\n"   # no file of its own and no pipeline: no place


def _line(path: Path, text: str) -> int:
    """The number of the one line of ``path`` that holds ``text``."""
    found = [n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line]
    assert len(found) == 1, (text, found)
    return found[0]


@pytest.mark.slow
def test_submit_writes_the_candidate_s_findings_as_sarif_and_annotations(tmp_path):
    proj = BundleProject(tmp_path / "proj")
    done = proj.cli("submit", "review.py:unevaluated", "--input", "data=data.txt",
                    "--format", "sarif")
    assert done.returncode == 1   # MP701, an error: the gate still decides the exit
    assert re.search(r"^run r-[0-9a-f]+ succeeded, candidate c-[0-9a-f]+$", done.stderr, re.M)
    log = json.loads(done.stdout)
    assert _sarif_errors(log) == []
    results = log["runs"][0]["results"]
    assert [(r["ruleId"], r["level"], r["properties"]["source"]) for r in results] == [
        ("MP701", "error", "evidence")]
    # a finding of the evidence has no line of its own: it is shown at the pipeline
    assert results[0]["locations"][0]["physicalLocation"] == {
        "artifactLocation": {"uri": "review.py", "uriBaseId": "%SRCROOT%"},
        "region": {"startLine": _line(FIXTURE, "def unevaluated(")}}
    done = proj.cli("submit", "review.py:review", "--input", "data=data.txt", "--format",
                    "github")
    assert done.returncode == 0, done.stderr
    # a compile-time finding is shown where its diagnostic points (the step's call)
    call = _line(FIXTURE, "s = score(model=f.model, data=data, split=split)")
    assert done.stdout.startswith(f"::warning file=review.py,line={call},title=MP416 "
                                  "evaluation-reads-training-artifact::evaluation step 'score' "
                                  "reads 'inputs.data' as 'data'")
    assert done.stdout.count("\n") == 1


@pytest.mark.slow
def test_the_pre_commit_hook_stops_a_commit_on_a_check_error(tmp_path):
    """The hook .pre-commit-hooks.yaml publishes, run by pre-commit itself in a git repository:
    its fields as published (pre-commit's manifest reader checks them), the entry pointed at
    this interpreter's mlpipe (``language: python`` would pip-install the repository first)."""
    import shutil
    import subprocess
    import sys

    import yaml
    from pre_commit.clientlib import load_manifest

    [hook] = load_manifest(str(TESTS.parent / ".pre-commit-hooks.yaml"))
    assert (hook["id"], hook["entry"], hook["language"]) == ("mlpipe-check", "mlpipe check",
                                                            "python")
    repo = tmp_path / "repo"
    (repo / "fixtures" / "checks").mkdir(parents=True)
    shutil.copy(TESTS / "fixtures" / "checks" / "mp301.py", repo / "fixtures" / "checks")
    shutil.copy(TESTS / "fixtures" / "components.py", repo / "fixtures")
    (repo / "fixtures" / "__init__.py").write_text("")
    mlpipe = Path(sys.executable).with_name("mlpipe")
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "cache"),
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    git = ["git", "-c", "init.defaultBranch=main"]
    subprocess.run([*git, "init", "-q"], cwd=repo, check=True, env=env)

    def run(target: str) -> subprocess.CompletedProcess:
        local = {**{k: hook[k] for k in ("id", "name", "files", "pass_filenames",
                                         "require_serial")},
                 "entry": hook["entry"].replace("mlpipe", str(mlpipe), 1),
                 "language": "system", "args": [target]}
        (repo / ".pre-commit-config.yaml").write_text(yaml.safe_dump(
            {"repos": [{"repo": "local", "hooks": [local]}]}))
        subprocess.run(["git", "add", "-A"], cwd=repo, check=True, env=env)
        return subprocess.run([sys.executable, "-m", "pre_commit", "run", "--all-files"],
                              cwd=repo, env=env, capture_output=True, text=True, timeout=300)

    bad = run("fixtures/checks/mp301.py:bad")
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "mlpipe check" in bad.stdout and "Failed" in bad.stdout
    assert "error[MP301] artifact-kind-mismatch" in bad.stdout
    good = run("fixtures/checks/mp301.py:good")
    assert good.returncode == 0, good.stdout + good.stderr
    assert re.search(r"^mlpipe check\.+Passed$", good.stdout, re.M), good.stdout
