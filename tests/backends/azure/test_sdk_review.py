"""The reviewer's half for an azure-ai-ml pipeline (issue 39): a ``@dsl.pipeline`` with a DDP
step names its candidate in tags azure-ai-ml carries and ignores
(``mlpipe.candidate.model``/``.evaluation``), runs here, and its candidate reaches
``evidence``, a signed ``review --key``, ``promote`` into a real MLflow registry and ``trace``
back, as an mlpipe pipeline's does. Real keys, real store, the CLI as a process."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from mlflow_server import mlflow_server  # noqa: F401  (a real tracking server, per session)

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]
PIPELINE = ROOT / "tests" / "fixtures" / "azure" / "sdk" / "pipelines.py"


def cli(cwd: Path, *args: str, env: dict[str, str] | None = None
        ) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k not in ("MLPIPE_STORE_URL", "MLPIPE_HOME")}
    base["XDG_CACHE_HOME"] = str(cwd / ".cache")
    return subprocess.run([sys.executable, "-m", "mlpipe.cli", *args], cwd=cwd,
                          env={**base, **(env or {})}, capture_output=True, text=True,
                          timeout=600)


def test_an_azure_ai_ml_pipelines_candidate_reaches_review_promotion_and_trace(
        tmp_path, mlflow_server):  # noqa: F811
    pytest.importorskip("torch")
    from mlpipe.evidence.signatures import keys

    project = tmp_path / "team"
    project.mkdir()
    for name in ("ci", "dana"):
        keys.generate(project / f"{name}.pem")
    (project / "mlpipe.toml").write_text('[signing]\nkey = "ci.pem"\n')
    (project / "trust.yml").write_text(
        "identities:\n"
        "  ci: {public_key: ci.pub, may: [seal]}\n"
        "  dana: {public_key: dana.pub, may: [decide], accounts: [dana]}\n")
    done = cli(project, "submit", f"{PIPELINE}:reviewed")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "'fit' is launched as 2 process(es) the way Azure ML would" in done.stderr
    cand = re.search(r"^candidate (c-[0-9a-f]+)$", done.stdout + done.stderr, re.M)[1]

    shown = cli(project, "evidence", cand)  # seals its first bundle
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert "accuracy" in shown.stdout and "MP701" not in shown.stdout
    assert "MP717" not in shown.stdout  # the YAML written from the Python is no loose code
    verified = cli(project, "evidence", cand, "--verify", "--trust", "trust.yml")
    assert verified.returncode == 0, verified.stdout + verified.stderr

    (project / "policy.yml").write_text(
        "name: promotion-policy\n"
        "metrics:\n  - {name: accuracy, population: test, at_least: 0.8}\n"
        "findings_absent: [error]\nverify: true\n")
    decided = cli(project, "review", cand, "--accept", "--key", "dana.pem", "--trust",
                  "trust.yml", "--policy", "policy.yml",
                  "--note", "the DDP model scores 0.875 on the test split")
    assert decided.returncode == 0, decided.stdout + decided.stderr

    name = "sdk-" + re.sub(r"[^a-z0-9]", "-", tmp_path.name.lower())[-40:]
    env = {"MLFLOW_TRACKING_URI": mlflow_server}
    promoted = cli(project, "promote", cand, "--name", name, "--by", "ci", env=env)
    assert promoted.returncode == 0, promoted.stdout + promoted.stderr
    assert promoted.stdout.startswith(f"promoted {cand}: registered models:/{name}/1")
    traced = cli(project, "trace", f"models:/{name}/1", env=env)
    assert traced.returncode == 0, traced.stdout + traced.stderr
    assert f"candidate  {cand}\n" in traced.stdout and "accepted by dana" in traced.stdout
    assert traced.stdout.splitlines()[-1] == ("traced: the registered bytes are the "
                                              "candidate's model")
    assert "ok: the bundle and the files it names are unchanged" in traced.stdout
