"""`import mlpipe`, `mlpipe --help` and `mlpipe check` never import azure-ai-ml, SQLAlchemy,
torch or mlflow (not even to digest a component whose body imports torch)."""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PROBE = """
import json, sys
import mlpipe, mlpipe.cli
from click.testing import CliRunner
runner = CliRunner()
assert runner.invoke(mlpipe.cli.main, ["--help"]).exit_code == 0
assert runner.invoke(mlpipe.cli.main, ["check", "pipelines/defect_classifier.py"]).exit_code == 0
assert runner.invoke(mlpipe.cli.main, ["graph", "pipelines/defect_classifier.py"]).exit_code == 0
# the DDP example imports torch inside its step bodies only: taking its code digest must not
assert runner.invoke(mlpipe.cli.main, ["check", "pipelines/defect_classifier_ddp.py"]).exit_code == 0
heavy = sorted(m for m in sys.modules
               if m.split(".")[0] in ("sqlalchemy", "torch", "alembic", "mlflow")
               or m.startswith("azure.ai.ml"))
print(json.dumps(heavy))
"""


def test_light_commands_import_no_heavy_package():
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True,
                         text=True, check=True)
    assert json.loads(out.stdout) == []


def test_public_surface():
    import mlpipe
    assert {"component", "pipeline", "Input", "Output", "Param", "Candidate"} <= set(mlpipe.__all__)
    for name in mlpipe.__all__:
        assert hasattr(mlpipe, name)


# --- the read commands import only what they use (issue 29) ---------------------------------

import fnmatch  # noqa: E402
import re  # noqa: E402

import pytest  # noqa: E402

#: Runs one command as the ``mlpipe`` console script does, then lists what it imported.
COMMAND_PROBE = """
import atexit, json, sys
out = sys.argv.pop(1)
atexit.register(lambda: open(out, "w").write(json.dumps(sorted(sys.modules))))
sys.argv[0] = "mlpipe"
from mlpipe.cli import main
main()
"""

#: Every command imports the package's root, the CLI (its modules define the commands) and
#: the errors its one handler renders.
CLI = ["mlpipe", "mlpipe.version", "mlpipe.errors", "mlpipe.paths", "mlpipe.cli", "mlpipe.cli.*"]
#: What reading the store takes: its location, the plain-SQL reader, the views of its rows,
#: whether a run's process still lives (``/proc``, read by ``procstat``).
#: (The evidence sub-packages' ``__init__`` modules import nothing themselves.)
READ = [*CLI, "mlpipe.evidence", "mlpipe.evidence.storage", "mlpipe.evidence.storage.config",
        "mlpipe.evidence.storage.liveness", "mlpipe.procstat", "mlpipe.evidence.records",
        "mlpipe.evidence.records.fastpath", "mlpipe.evidence.records.populations",
        "mlpipe.evidence.records.reader", "mlpipe.evidence.records.read_*",
        "mlpipe.evidence.records.sourcediff", "mlpipe.evidence.records.summaries",
        "mlpipe.evidence.records.views", "mlpipe.evidence.reports",
        "mlpipe.evidence.reports.terminal", "mlpipe.digests"]
#: A sealed bundle's findings are judged and rendered against the table of codes.
FINDINGS = ["mlpipe.codes", "mlpipe.codes.*", "mlpipe.diagnostics", "mlpipe.evidence.records",
            "mlpipe.evidence.records.findings", "mlpipe.evidence.records.populations"]
#: The mlpipe modules each read command may import (fnmatch patterns).
MAY_IMPORT: dict[str, list[str]] = {
    "--version": CLI,
    "--help": CLI,
    "runs": READ,
    "show": READ,
    "diff": READ,
    "logs": [*READ, "mlpipe.evidence.records.logs"],
    # the trust policy only when one is configured (the SIGNED column judges by it)
    "candidates": [*READ, *FINDINGS, "mlpipe.evidence.signatures",
                   "mlpipe.evidence.signatures.trust", "mlpipe.evidence.signatures.keys",
                   "mlpipe.evidence.signatures.dsse"],
    "evidence": [*CLI, "mlpipe.evidence", "mlpipe.evidence.storage",
                 "mlpipe.evidence.storage.config", "mlpipe.evidence.records.fastpath",
                 "mlpipe.digests", *FINDINGS, "mlpipe.evidence.reports",
                 "mlpipe.evidence.reports.render", "mlpipe.evidence.storage.ci",
                 "mlpipe.evidence.reports.terminal", "mlpipe.evidence.reports.tiers"],
}
#: Third-party packages no read command needs (nor the DSL, whose imports they would show).
HEAVY = ("azure", "mlflow", "sqlalchemy", "alembic", "pandas", "numpy", "torch", "networkx",
         "pydantic", "yaml", "jsonschema", "cryptography", "rich", "blake3", "securesystemslib",
         "model_signing", "cyclonedx", "jinja2", "requests", "urllib3", "msal")


@pytest.fixture(scope="module")
def store_project(tmp_path_factory):
    """A project with two recorded runs (the second reuses the first) and a sealed bundle."""
    sys.path.insert(0, os.path.dirname(__file__))
    from bundle_project import BundleProject

    project = BundleProject(tmp_path_factory.mktemp("read-commands"))
    first = project.submit()
    candidate = project.submit()
    assert first and project.evidence(candidate).returncode in (0, 1)  # seals the bundle
    runs = re.findall(r"\b(r-[0-9a-f]{10})\b", project.cli("runs").stdout)
    return project, runs[1], runs[0], candidate


def _imported(project, args: list[str], tmp_path) -> list[str]:
    out = tmp_path / "modules.json"
    env = {k: v for k, v in os.environ.items() if k not in ("MLPIPE_HOME", "MLPIPE_STORE_URL")}
    done = subprocess.run([sys.executable, "-c", COMMAND_PROBE, str(out), *args],
                          cwd=project.root, env=env, capture_output=True, text=True)
    assert done.returncode in (0, 1), done.stderr  # diff exits 1 when the runs differ
    return json.loads(out.read_text())


@pytest.mark.parametrize("command", list(MAY_IMPORT))
def test_read_command_imports_only_what_it_uses(store_project, command, tmp_path):
    project, run_a, run_b, candidate = store_project
    args = {"--version": ["--version"], "--help": ["--help"], "runs": ["runs"],
            "show": ["show", run_b], "diff": ["diff", run_a, run_b],
            "logs": ["logs", run_b, "fit"], "candidates": ["candidates"],
            "evidence": ["evidence", candidate]}[command]
    modules = _imported(project, args, tmp_path)
    allowed = MAY_IMPORT[command]
    crept = [m for m in modules if m.split(".")[0] == "mlpipe"
             and not any(fnmatch.fnmatchcase(m, p) for p in allowed)]
    assert not crept, f"mlpipe {' '.join(args)} imports {crept[0]} (and {crept[1:]})"
    heavy = [m for m in modules if m.split(".")[0] in HEAVY]
    assert not heavy, f"mlpipe {' '.join(args)} imports {heavy[0]} (and {heavy[1:]})"


def test_a_public_name_is_imported_on_first_use():
    out = subprocess.run([sys.executable, "-c", (
        "import json, sys, mlpipe; before = 'mlpipe.dsl' in sys.modules; "
        "from mlpipe import component, Input, __version__; "
        "print(json.dumps([before, 'mlpipe.dsl' in sys.modules, component.__module__, "
        "Input.__module__, sorted(set(mlpipe.__all__) - set(dir(mlpipe)))]))")],
        cwd=ROOT, capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == [False, True, "mlpipe.dsl", "mlpipe.annotations", []]


def test_an_unknown_name_is_an_attribute_error():
    import mlpipe

    with pytest.raises(AttributeError, match="module 'mlpipe' has no attribute 'nope'"):
        mlpipe.nope
