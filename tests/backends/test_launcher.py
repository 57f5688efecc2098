"""The local launcher on real processes: a real gloo DDP group, TF_CONFIG, failures, timeouts."""
import json
import os
import pathlib
import shutil
import sys
import time

import pytest

from mlpipe import Mpi, PyTorch, TensorFlow
from mlpipe.backends.local.launcher import CoordinationFailed, launch, plan
from mlpipe.errors import LaunchFailed, UsageError
from timing import limit

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "tests" / "fixtures" / "distributed"
AZURE_VARS = {"MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK", "NODE_RANK",
              "LOCAL_WORLD_SIZE"}


def _env(tmp_path, **extra):
    env = dict(os.environ, PYTHONPATH=str(ROOT), MLPIPE_STEP_DIR=str(tmp_path / "step"), **extra)
    return env


def _alive(pid: int) -> bool:
    try:
        state = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _ddp(tmp_path, mode, *, ppn, instances, **kw):
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    result = launch([sys.executable, str(SCRIPTS / "ddp_script.py"), mode, str(out)],
                    distribution=PyTorch(processes_per_node=ppn, backend="gloo", writers="rank0"),
                    instances=instances, env=_env(tmp_path), cwd=str(ROOT),
                    log_dir=tmp_path / "logs", **kw)
    return result, out


def test_plan_gives_each_rank_exactly_the_azure_variables():
    layout = plan(PyTorch(processes_per_node=2), 2)
    assert [set(v) for *_, v in layout.roles] == [AZURE_VARS] * 4
    assert [(v["RANK"], v["LOCAL_RANK"], v["NODE_RANK"]) for *_, v in layout.roles] == [
        ("0", "0", "0"), ("1", "1", "0"), ("2", "0", "1"), ("3", "1", "1")]
    assert {v["WORLD_SIZE"] for *_, v in layout.roles} == {"4"}
    assert {v["MASTER_PORT"] for *_, v in layout.roles} == {str(layout.master_port)}


@pytest.mark.slow
def test_workers_see_only_their_launch_variables(tmp_path):
    env = _env(tmp_path, RANK="99", TF_CONFIG="{}", OMPI_COMM_WORLD_RANK="5")
    launch([sys.executable, str(SCRIPTS / "show_env.py"), str(tmp_path)],
           distribution=PyTorch(processes_per_node=2), instances=1, env=env,
           log_dir=tmp_path / "logs", timeout=limit(60), require_coordination=False)
    seen = [json.loads((tmp_path / f"env-worker-{r}.json").read_text()) for r in range(2)]
    assert [set(s) - {"MLPIPE_WRITERS"} for s in seen] == [AZURE_VARS, AZURE_VARS]
    assert [s["RANK"] for s in seen] == ["0", "1"]


@pytest.mark.slow
def test_tf_config_is_well_formed_for_three_workers(tmp_path):
    result = launch([sys.executable, str(SCRIPTS / "show_env.py"), str(tmp_path)],
                    distribution=TensorFlow(workers=3), instances=3, env=_env(tmp_path),
                    log_dir=tmp_path / "logs", timeout=limit(60))
    configs = [json.loads(json.loads((tmp_path / f"env-worker-{i}.json").read_text())["TF_CONFIG"])
               for i in range(3)]
    hosts = configs[0]["cluster"]["worker"]
    assert len(hosts) == 3 and len(set(hosts)) == 3
    assert all(h.startswith("127.0.0.1:") and h.split(":")[1].isdigit() for h in hosts)
    for i, config in enumerate(configs):
        assert config == {"cluster": {"worker": hosts}, "task": {"type": "worker", "index": i}}
    assert result.world_size == 3 and result.framework == "tensorflow"


@pytest.mark.slow
def test_two_by_two_ddp_ranks_agree_on_final_weights_and_coordinate(tmp_path):
    pytest.importorskip("torch")
    result, out = _ddp(tmp_path, "good", ppn=2, instances=2, timeout=limit(240))
    weights = [json.loads((out / f"weights-{r}.json").read_text()) for r in range(4)]
    assert weights[0] == weights[1] == weights[2] == weights[3]
    assert abs(weights[0][0][1] - (-2.0)) < 0.3    # it learnt something, together
    assert [(w.rank, w.local_rank, w.node_rank, w.returncode) for w in result.workers] == [
        (0, 0, 0, 0), (1, 1, 0, 0), (2, 0, 1, 0), (3, 1, 1, 0)]
    assert all(w.joined for w in result.workers)
    report = result.coordination
    assert report.ok and report.findings == ()
    assert (report.population, report.covered, report.consumed) == (48, 48, dict.fromkeys(range(4), 12))
    assert report.writers == {"model": (0,)}
    assert report.metrics == {"train_loss": {"scopes": ["global"], "global_ranks": [0]}}
    assert sorted(p.name for p in out.glob("model-from-*")) == ["model-from-0.pt"]


@pytest.mark.slow
def test_ranks_whose_last_call_is_a_reduced_metric_exit_cleanly(tmp_path):
    pytest.importorskip("torch")
    for attempt in range(3):   # the abort it guards against came in about one run in five
        out = tmp_path / f"out-{attempt}"
        out.mkdir()
        launch([sys.executable, str(SCRIPTS / "reduce_release.py"), str(out)],
               distribution=PyTorch(processes_per_node=2, backend="gloo"), instances=1,
               env=_env(tmp_path), cwd=str(ROOT), log_dir=tmp_path / f"logs-{attempt}",
               timeout=limit(120), require_coordination=False)
        assert [(out / f"value-{r}").read_text() for r in range(2)] == ["1.0", "1.0"]


@pytest.mark.slow
def test_every_rank_reading_everything_fails_as_independent_copies(tmp_path):
    pytest.importorskip("torch")
    with pytest.raises(CoordinationFailed, match=r"(?s)coordination check failed.*MP522.*all 2 "
                                                 r"ranks consumed the whole data set \(48 examples\)"):
        _ddp(tmp_path, "copies", ppn=2, instances=1, timeout=limit(240))


@pytest.mark.slow
def test_two_ranks_writing_the_model_fails_the_single_writer_check(tmp_path):
    pytest.importorskip("torch")
    with pytest.raises(CoordinationFailed, match=r"(?s)MP524.*output 'model' was written by 2 "
                                                 r"ranks \(0, 1\); its writer policy is 'rank0'") as info:
        _ddp(tmp_path, "two-writers", ppn=2, instances=1, timeout=limit(240))
    assert info.value.result.coordination.writers == {"model": (0, 1)}


@pytest.mark.slow
def test_a_rank_that_exits_1_fails_the_step_and_leaves_no_process(tmp_path):
    pytest.importorskip("torch")
    started = time.monotonic()
    with pytest.raises(LaunchFailed, match=r"(?s)rank 1 of 4 exited with code 1 after .* s; the "
                                           r"other processes were stopped.*simulated failure") as info:
        _ddp(tmp_path, "fail", ppn=2, instances=2, timeout=limit(120))
    assert time.monotonic() - started < limit(120)
    assert (info.value.rank, info.value.returncode) == (1, 1)
    out = tmp_path / "out"
    pids = [int((out / f"pid-{r}").read_text()) for r in range(4)]
    pids.append(int((out / "grandchild").read_text()))
    assert [p for p in pids if _alive(p)] == []


@pytest.mark.slow
def test_a_hanging_rank_ends_the_group_at_the_step_timeout(tmp_path):
    pytest.importorskip("torch")
    with pytest.raises(LaunchFailed, match=r"the step exceeded its timeout of 20 s; ranks still "
                                           r"running: .*1"):
        _ddp(tmp_path, "hang", ppn=2, instances=1, timeout=20)
    pids = [int((tmp_path / "out" / f"pid-{r}").read_text()) for r in range(2)]
    assert [p for p in pids if _alive(p)] == []


@pytest.mark.slow
def test_a_rank_that_never_joins_fails_the_rendezvous(tmp_path):
    pytest.importorskip("torch")
    with pytest.raises(LaunchFailed, match=r"rank 1 of 2 did not join the rendezvous at "
                                           r"127.0.0.1:\d+ within 15 s") as info:
        _ddp(tmp_path, "late-join", ppn=2, instances=1, timeout=limit(120), rendezvous_timeout=15)
    assert info.value.rank == 1
    pids = [int((tmp_path / "out" / f"pid-{r}").read_text()) for r in range(2)]
    assert [p for p in pids if _alive(p)] == []


def test_mpi_without_mpirun_is_a_clear_error(tmp_path):
    env = dict(os.environ, PATH=str(tmp_path))
    with pytest.raises(UsageError, match="an Mpi distribution is launched with mpirun, and no "
                                         "mpirun is on PATH"):
        launch([sys.executable, "-c", "pass"], distribution=Mpi(processes_per_node=2),
               env=env, log_dir=tmp_path)


def test_bad_arguments_are_usage_errors(tmp_path):
    with pytest.raises(UsageError, match="argv must be a non-empty list of strings"):
        launch("python train.py", distribution=None, log_dir=tmp_path)
    with pytest.raises(UsageError, match="instances=0; the node count is an int >= 1"):
        launch(["python"], distribution=None, instances=0, log_dir=tmp_path)


needs_mpirun = pytest.mark.skipif(shutil.which("mpirun") is None, reason="OpenMPI not installed")


@pytest.mark.slow
@needs_mpirun
def test_mpi_launches_world_size_ranks_through_mpirun(tmp_path):
    result = launch([sys.executable, str(SCRIPTS / "mpi_script.py"), str(tmp_path)],
                    distribution=Mpi(processes_per_node=2), instances=2, env=_env(tmp_path),
                    cwd=str(ROOT), log_dir=tmp_path / "logs", timeout=limit(120))
    seen = [json.loads((tmp_path / f"mpi-{r}.json").read_text()) for r in range(4)]
    assert [(s["rank"], s["world_size"]) for s in seen] == [(r, 4) for r in range(4)]
    assert (result.framework, result.world_size) == ("mpi", 4)


@pytest.mark.slow
@needs_mpirun
def test_an_mpi_rank_that_exits_3_is_named(tmp_path):
    with pytest.raises(LaunchFailed, match=r"(?s)rank 1 of 2 exited with code 3; mpirun stopped "
                                           r"the job.*rank-1.log:\n    rank 1 fails on purpose\n"):
        launch([sys.executable, str(SCRIPTS / "mpi_script.py"), str(tmp_path), "1"],
               distribution=Mpi(processes_per_node=2), env=_env(tmp_path), cwd=str(ROOT),
               log_dir=tmp_path / "logs", timeout=limit(120))


_JOINS_FROM_A_CHILD = r'''
import os, socket, threading, time
port = int(os.environ["MASTER_PORT"])
if os.environ["RANK"] == "0":
    server = socket.create_server(("127.0.0.1", port))
    held = []
    def serve():
        while True:
            held.append(server.accept()[0])
    threading.Thread(target=serve, daemon=True).start()
for _ in range(200):
    try:
        client = socket.create_connection(("127.0.0.1", port))
        break
    except OSError:
        time.sleep(0.05)
time.sleep(1.5)
'''


@pytest.mark.slow
def test_a_rank_whose_child_holds_the_store_connection_is_seen_joining(tmp_path):
    # the rank's leader is a shell; the connection to the store is its child's: the probe
    # finds it among the processes of the rank's group
    script = tmp_path / "joins.py"
    script.write_text(_JOINS_FROM_A_CHILD)
    result = launch(["bash", "-c", f"{sys.executable} {script}; exit $?"],
                    distribution=PyTorch(processes_per_node=2), instances=1, env=dict(os.environ),
                    log_dir=tmp_path / "logs", timeout=limit(60), rendezvous_timeout=30)
    assert [r["joined"] for r in result.topology()["ranks"]] == [True, True]


def test_the_rendezvous_probe_counts_only_a_connection_to_the_store(tmp_path):
    # real processes: one connected to the store's port, one to another port, one with no
    # socket at all: the probe sees the first joined, and only the first
    import socket
    import subprocess

    from mlpipe.backends.local.launcher.group import ProcessGroup
    from mlpipe.backends.local.launcher.layout import Plan

    store, other = socket.create_server(("127.0.0.1", 0)), socket.create_server(("127.0.0.1", 0))
    connect = ("import socket, sys, time\n"
               "s = socket.create_connection(('127.0.0.1', int(sys.argv[1]))) "
               "if sys.argv[1] != '0' else None\nprint('ready', flush=True)\ntime.sleep(30)\n")
    ports = [store.getsockname()[1], other.getsockname()[1], 0]
    procs = [subprocess.Popen([sys.executable, "-c", connect, str(p)], stdout=subprocess.PIPE,
                              text=True, start_new_session=True) for p in ports]
    try:
        for proc in procs:
            assert proc.stdout.readline() == "ready\n"
        layout = Plan("pytorch", 3, 3, [(r, r, 0, "worker", {}) for r in range(3)],
                      ports[0])
        group = ProcessGroup([], layout, {}, None, tmp_path)
        group.procs = procs
        assert group._probe_rendezvous(ports[0]) is False
        assert group.joined == {0: True, 1: False, 2: False}
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
        store.close()
        other.close()
