"""A throw-away user project for executor tests: fixture pipelines copied into a folder."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from timing import limit

FIXTURES = Path(__file__).parent / "fixtures" / "executor"
MODULES = ("steps", "chain", "hold", "failing", "odd", "observed", "hidden", "diagnosed",
           "ddp_plain", "spawner", "ddp_counts")


class Project:
    """A project folder with the executor fixtures, numbers in ``left.txt``/``right.txt``."""

    def __init__(self, root: Path, store_url: str | None = None) -> None:
        self.root = root
        self.store_url = store_url
        root.mkdir(parents=True, exist_ok=True)
        for name in MODULES:
            shutil.copy(FIXTURES / f"{name}.py", root / f"{name}.py")
        (root / "left.txt").write_text("5")
        (root / "right.txt").write_text("7")
        (root / "scratch.txt").write_text("1")

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.pop("MLPIPE_HOME", None)
        if self.store_url:
            env["MLPIPE_STORE_URL"] = self.store_url
        else:
            env.pop("MLPIPE_STORE_URL", None)
        return env

    def cli(self, *args: str, timeout: float = 120, env_extra: dict[str, str] | None = None,
            **kw) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "mlpipe.cli", *args], cwd=self.root,
                              env={**self.env(), **(env_extra or {})}, capture_output=True,
                              text=True, timeout=limit(timeout), **kw)

    def popen(self, *args: str, env_extra: dict[str, str] | None = None) -> subprocess.Popen:
        # SIGINT as a terminal delivers it, also when the suite itself runs as a background
        # job (whose shell ignores SIGINT, and a child inherits that)
        return subprocess.Popen([sys.executable, "-m", "mlpipe.cli", *args], cwd=self.root,
                                env={**self.env(), **(env_extra or {})}, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))

    def submit(self, pipeline: str, *extra: str, inputs=("left=left.txt", "right=right.txt"),
               timeout: float = 120):
        args = ["submit", pipeline if ".py:" in pipeline else f"{pipeline}.py"]
        for item in inputs:
            args += ["--input", item]
        return self.cli(*args, *extra, timeout=timeout)
