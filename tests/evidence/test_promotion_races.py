"""Promotion under concurrency and crashes, against a real `mlflow server`: N concurrent
`mlpipe promote`s of one candidate register one version and record one promotion; a promote
killed with SIGKILL after each step (the claim, each registry call) leaves a state the next
`promote` finishes and `trace` names (a version registered but not recorded: MP741, exit 1,
never another version's promotion); an unreachable tracking server fails within seconds with
one line. Real submits, a real store, the CLI as processes."""
from __future__ import annotations

import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from bundle_project import PROMOTION_POLICY, BundleProject
from mlflow_server import mlflow_server  # noqa: F401  (a real tracking server, per session)

pytestmark = pytest.mark.slow

PROMOTERS = 3
#: Runs the CLI with one step patched to SIGKILL its own process right after the step returns.
KILLER = """
import os, signal, sys
owner_name, attr = sys.argv[1].rsplit(".", 1)
if owner_name == "claims":
    import mlpipe.evidence.qualification.claims as owner
else:
    from mlflow import MlflowClient as owner
step = getattr(owner, attr)
def killed(*args, **kwargs):
    step(*args, **kwargs)
    os.kill(os.getpid(), signal.SIGKILL)
setattr(owner, attr, killed)
from mlpipe.cli import main
sys.argv = ["mlpipe", *sys.argv[2:]]
main()
"""
STEPS = ["claims.take", "MlflowClient.search_model_versions", "MlflowClient.create_run",
         "MlflowClient.log_artifacts", "MlflowClient.set_terminated",
         "MlflowClient.create_registered_model", "MlflowClient.create_model_version",
         "MlflowClient.set_registered_model_alias"]


@pytest.fixture(scope="module")
def accepted(tmp_path_factory, mlflow_server):  # noqa: F811
    proj = BundleProject(tmp_path_factory.mktemp("races") / "proj")
    cand = proj.submit()
    assert proj.evidence(cand).returncode == 0
    (proj.root / "policy.yml").write_text(PROMOTION_POLICY)
    done = proj.cli("review", cand, "--accept", "--by", "dana", "--note", "meets it",
                    "--policy", "policy.yml")
    assert done.returncode == 0, done.stderr
    return proj, cand, {"MLFLOW_TRACKING_URI": mlflow_server}


def _versions(uri: str, name: str) -> list[str]:
    from mlflow import MlflowClient

    return sorted(v.version for v in MlflowClient(uri).search_model_versions(f"name = '{name}'"))


def _recorded(proj: BundleProject, name: str) -> list[tuple]:
    import sqlalchemy as sa

    engine = sa.create_engine(f"sqlite:///{proj.root / 'evidence' / 'store.sqlite'}")
    with engine.connect() as conn:
        rows = [tuple(r) for r in conn.execute(sa.text(
            "SELECT version FROM promotions WHERE name = :n"), {"n": name})]
        claims = conn.execute(sa.text("SELECT count(*) FROM promotion_claims WHERE name = :n"),
                              {"n": name}).scalar_one()
    engine.dispose()
    return rows + [("claims", claims)]


def test_concurrent_promotions_register_one_version_and_one_record(accepted):
    proj, cand, env = accepted
    name = "m-concurrent"
    with ThreadPoolExecutor(PROMOTERS) as pool:
        done = list(pool.map(lambda i: proj.cli("promote", cand, "--name", name, "--by",
                                                f"p{i}", env=env), range(PROMOTERS)))
    assert [d.returncode for d in done] == [0] * PROMOTERS, [d.stderr for d in done]
    firsts = sorted(d.stdout.splitlines()[0] for d in done)
    assert firsts == sorted([f"promoted {cand}: registered models:/{name}/1 at "
                             f"{env['MLFLOW_TRACKING_URI']}"] +
                            [f"promoted {cand}: already registered as models:/{name}/1 at "
                             f"{env['MLFLOW_TRACKING_URI']}"] * (PROMOTERS - 1))
    assert _versions(env["MLFLOW_TRACKING_URI"], name) == ["1"]
    assert _recorded(proj, name) == [("1",), ("claims", 0)]


@pytest.mark.parametrize("step", STEPS)
def test_a_promote_killed_after_each_step_is_finished_by_the_next(accepted, step):
    proj, cand, env = accepted
    name = "m-kill-" + step.rsplit(".", 1)[1].replace("_", "-")
    killed = subprocess.run(
        [sys.executable, "-c", KILLER, step, "promote", cand, "--name", name, "--alias",
         "champion"], cwd=proj.root, capture_output=True, text=True, timeout=180,
        env={**__import__("os").environ, **env})
    assert killed.returncode == -9, killed.stderr
    versions = _versions(env["MLFLOW_TRACKING_URI"], name)
    registered = step in ("MlflowClient.create_model_version",
                          "MlflowClient.set_registered_model_alias")
    assert versions == (["1"] if registered else [])
    if registered:   # half-registered: the version exists, no promotion row
        traced = proj.cli("trace", f"models:/{name}/1", env=env)
        assert traced.returncode == 1, traced.stdout + traced.stderr
        assert re.search(rf"error\[MP741\] the evidence store records no promotion of "
                         rf"models:/{name}/1, though it carries candidate {cand}'s lineage "
                         rf"tags", traced.stdout), traced.stdout
        assert "\npromotion  " not in traced.stdout   # never another version's promotion
    again = proj.cli("promote", cand, "--name", name, "--alias", "champion", env=env)
    assert again.returncode == 0, again.stderr
    verb = "already registered as" if registered else "registered"
    assert again.stdout.splitlines()[0] == (f"promoted {cand}: {verb} models:/{name}/1 (alias "
                                            f"champion) at {env['MLFLOW_TRACKING_URI']}")
    assert again.stdout.splitlines()[1].startswith("  took over the promotion process ")
    assert _versions(env["MLFLOW_TRACKING_URI"], name) == ["1"]
    assert _recorded(proj, name) == [("1",), ("claims", 0)]
    traced = proj.cli("trace", f"models:/{name}/1", env=env)
    assert traced.returncode == 0, traced.stdout + traced.stderr
    assert f"\npromotion  models:/{name}/1@champion at " in traced.stdout


def test_an_unreachable_tracking_server_fails_in_seconds_with_one_line(accepted):
    proj, cand, _ = accepted
    started = time.monotonic()
    done = proj.cli("promote", cand, "--name", "m-unreachable",
                    env={"MLFLOW_TRACKING_URI": "http://127.0.0.1:9"})
    assert time.monotonic() - started < 60
    assert done.returncode == 2
    assert done.stderr == ("error: the MLflow registry at http://127.0.0.1:9 refused the "
                           "promotion: the server cannot be reached: Connection refused (3 "
                           "tries)\n  help: check the tracking URI (MLFLOW_TRACKING_URI or "
                           "--tracking-uri) and that the server is running\n")
    assert _recorded(proj, "m-unreachable") == [("claims", 0)]   # the claim was given up


def test_a_sqlite_tracking_uri_under_a_regular_file_is_one_line(accepted, tmp_path):
    proj, cand, _ = accepted
    (tmp_path / "file.txt").write_text("not a folder")
    uri = f"sqlite:///{tmp_path}/file.txt/mlflow.db"
    done = proj.cli("promote", cand, "--name", "m-file", env={"MLFLOW_TRACKING_URI": uri})
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.splitlines()[0] == (f"error: the MLflow registry at {uri} refused the "
                                           f"promotion: {tmp_path}/file.txt is a file, where "
                                           f"the URI needs a folder")
