"""One library call per command: the CLI parses, calls its ``mlpipe.commands`` entry and
renders; the orchestration (run, submit, export, follow, sync, promote) is never imported by
``mlpipe/cli/``, and ``mlpipe.submit/1`` is built in one place."""
from __future__ import annotations

import ast
import pathlib

from mlpipe.commands.request import Submitted
from mlpipe.evidence.qualification.gate import RunReport

CLI = pathlib.Path(__file__).resolve().parents[2] / "mlpipe" / "cli"

#: What only ``mlpipe.commands`` puts together for a command.
ORCHESTRATION = {"mlpipe.backends.local.executor", "mlpipe.backends.azure.submit",
                 "mlpipe.backends.azure.export", "mlpipe.backends.azure.staging",
                 "mlpipe.backends.azure.follow", "mlpipe.backends.azure.ingest",
                 "mlpipe.evidence.qualification.promotion", "mlpipe.evidence.qualification.claims"}


def _imports(path: pathlib.Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
    return found


def test_the_cli_never_orchestrates():
    crept = {f"{p.name}: {m}" for p in CLI.glob("*.py") for m in _imports(p) & ORCHESTRATION}
    assert crept == set()


def test_one_builder_gives_a_local_submit_document_every_key():
    done = Submitted("local", "r-0a1b2c3d4e", "p", "sha256:00", "completed", "c-0a1b2c3d4e",
                     RunReport("r-0a1b2c3d4e", "c-0a1b2c3d4e", []), "sqlite:///x", None)
    assert done.document("warning") == {
        "format": "mlpipe.submit/1", "run_id": "r-0a1b2c3d4e", "target": "local",
        "pipeline": "p", "pipeline_digest": "sha256:00", "status": "completed",
        "job_name": None, "studio_url": None, "azure_status": None, "experiment": None,
        "workspace": None, "candidate_id": "c-0a1b2c3d4e", "failed_steps": [], "ci": None,
        "findings": [], "fail_on": "warning", "failing_findings": 0}
