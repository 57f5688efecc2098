"""Project folders ("homes") of a team that shares one evidence store and one shared artifact
root, each running the mlpipe CLI as a real process in its own folder."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from bundle_project import FIXTURE
from timing import limit


class Home:
    """A project folder of its own, pointed at the team's store and shared root."""

    def __init__(self, root: Path, store_url: str, shared: Path | str | None, data: Path,
                 env: dict[str, str] | None = None) -> None:
        self.root, self.store_url, self.data = root, store_url, data
        self.env = dict(env or {})
        root.mkdir(parents=True)
        shutil.copy(FIXTURE, root / "review.py")
        lines = [] if shared is None else ["[artifacts]", f'shared = "{shared}"']
        (root / "mlpipe.toml").write_text("\n".join(lines) + "\n")

    @property
    def own(self) -> Path:
        return self.root / "evidence" / "artifacts"

    def cli(self, *args: str) -> subprocess.CompletedProcess:
        env = {k: v for k, v in os.environ.items()
               if k not in ("MLPIPE_HOME", "MLPIPE_ARTIFACT_ROOT", "MLPIPE_SHARED_ARTIFACTS")}
        env["MLPIPE_STORE_URL"] = self.store_url
        env.update(self.env)
        return subprocess.run([sys.executable, "-m", "mlpipe.cli", *args], cwd=self.root,
                              env=env, capture_output=True, text=True, timeout=limit(180))

    def submit(self) -> tuple[str, str]:
        done = self.cli("submit", "review.py:review", "--input", f"data={self.data}")
        assert done.returncode == 0, done.stderr
        return re.search(r"^candidate (c-[0-9a-f]+)$", done.stdout, re.M).group(1), done.stderr

    def bundle(self, candidate: str) -> dict:
        done = self.cli("evidence", candidate, "--format", "json")
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    def verify(self, candidate: str) -> subprocess.CompletedProcess:
        """Seal the candidate's bundle as the store has it now (its first, or the next when a
        reproduction was recorded since: an explicit --rebuild), then verify it."""
        assert self.cli("evidence", candidate, "--rebuild").returncode == 0
        return self.cli("evidence", candidate, "--verify")


def statuses(stderr: str) -> set[str]:
    return {m.group(1) for m in re.finditer(r"^\[\d+/\d+\] +\S+ +(executed|reused)\b", stderr,
                                           re.M)}
