"""A throw-away project for the evidence-bundle tests: the review pipelines, a data file, and
the mlpipe CLI run in it as a real process."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from timing import limit

FIXTURE = Path(__file__).parent / "fixtures" / "evidence" / "review.py"


#: What ``submit`` says on stderr when its --fail-on gate makes it exit 1.
#: A policy the bundle project's candidate meets (accuracy on its test split), for the
#: review and promotion tests.
PROMOTION_POLICY = """name: promotion-policy
description: accuracy on the held-out test split
metrics:
  - {name: accuracy, population: test, at_least: 0.8}
findings_absent: [error]
verify: true
"""

GATED = re.compile(r"^error: candidate c-[0-9a-f]+ carries \d+ findings? of severity \w+ or "
                   r"worse \(.*\): it is not ready for review", re.M)


class BundleProject:
    def __init__(self, root: Path, store_url: str | None = None) -> None:
        self.root = root
        self.store_url = store_url
        root.mkdir(parents=True, exist_ok=True)
        shutil.copy(FIXTURE, root / "review.py")
        (root / "mlpipe.toml").write_text("")
        (root / "data.txt").write_text("1 2 3 4 5 6 7 8\n")
        (root / "tree").mkdir(exist_ok=True)
        (root / "tree" / "train.txt").write_text("1 2 3 4 5 6\n")
        (root / "tree" / "test.txt").write_text("7 8\n")

    def cli(self, *args: str, timeout: float = 180,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        extra, env = env or {}, dict(os.environ)
        env.pop("MLPIPE_HOME", None)
        env.pop("MLPIPE_STORE_URL", None)
        if self.store_url:
            env["MLPIPE_STORE_URL"] = self.store_url
        env.update(extra)
        return subprocess.run([sys.executable, "-m", "mlpipe.cli", *args], cwd=self.root,
                              env=env, capture_output=True, text=True, timeout=limit(timeout))

    def submit(self, pipeline: str = "review", *extra: str, data: str = "data.txt") -> str:
        done = self.cli("submit", f"review.py:{pipeline}", "--input", f"data={data}", *extra)
        # submit's gate: exit 1 exactly when the candidate carries an error-severity finding
        assert done.returncode == (1 if GATED.search(done.stderr) else 0), done.stderr
        return re.search(r"^candidate (c-[0-9a-f]+)$", done.stdout, re.M).group(1)

    def evidence(self, candidate: str, *extra: str) -> subprocess.CompletedProcess:
        return self.cli("evidence", candidate, *extra)

    def bundle(self, candidate: str, *extra: str) -> dict:
        done = self.evidence(candidate, "--format", "json", *extra)
        assert done.returncode in (0, 1), done.stderr
        bundle = json.loads(done.stdout)
        # the findings gate: exit 1 exactly when the bundle carries an error-severity finding
        # (compile-time, run-time or evidence: findings.every_finding)
        from mlpipe.evidence.records.findings import every_finding

        errors = [f for f in every_finding(bundle["predicate"]) if f["severity"] == "error"]
        assert done.returncode == (1 if errors else 0), done.stderr
        return bundle

    def sql(self, statement: str) -> None:
        import sqlalchemy as sa

        url = self.store_url or f"sqlite:///{self.root / 'evidence' / 'store.sqlite'}"
        engine = sa.create_engine(url)
        with engine.begin() as conn:
            conn.execute(sa.text(statement))
        engine.dispose()


_VOLATILE = [(re.compile(r"\br-[0-9a-f]{10}\b"), "r-<run>"),
             (re.compile(r"\bs-[0-9a-f]{12}\b"), "s-<step-run>"),
             (re.compile(r"\bc-[0-9a-f]{10}\b"), "c-<candidate>"),
             (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?"), "<time>"),
             # this machine's interpreter and the size of its package set
             (re.compile(r"python \d+\.\d+\.\d+ (\(.*?\)), \d+ packages"),
              r"python <version> \1, <count> packages")]


def mask(text: str, root: Path) -> str:
    """Mask what varies between runs of the same pipeline: ids, times, paths, user, host."""
    text = text.replace(str(root), "<project>")
    for pattern, repl in _VOLATILE:
        text = pattern.sub(repl, text)
    return text


def mask_bundle(bundle: dict) -> dict:
    """The JSON bundle with its machine-specific fields replaced (the rest is golden)."""
    p = bundle["predicate"]
    p["run"].update(user="<user>", host="<host>")
    p["generator"] = "mlpipe <version>"
    if p["code"] is not None:
        p["code"] = {"commit": "<commit>", "dirty": "<dirty>"}
    for st in p["steps"]:
        st["cache_key"] = "<cache-key>"   # covers the interpreter's version
        if st.get("interpreter"):  # this machine's interpreter and its package set
            st["interpreter"].update(python="<python>", version="<version>",
                                     packages_digest="<packages>", packages="<count>")
        ran = (st["topology"] or {}).get("ran")
        if ran:
            ran["ranks"] = "<ranks>"
    return bundle
