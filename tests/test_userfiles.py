"""Hostile files handed to each reader of a user's file (keys, `keys show`, trust and
qualification policies, Azure ML job files): random bytes, alias bombs, deep nesting, FIFOs, devices and huge
files each end in one UsageError naming the file, in bounded time and memory; never a
traceback, a hang or a MemoryError. Keys readable by others are refused, as ssh refuses them."""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mlpipe import userfiles
from mlpipe.errors import UsageError
from mlpipe.evidence.qualification.policy import load_policy
from mlpipe.evidence.signatures.keys import generate, load_private
from mlpipe.evidence.signatures.trust import load_trust

SECONDS = 10
PEAK_BYTES = 64 << 20


def _trust(path: Path) -> None:
    load_trust(path)


def _policy(path: Path) -> None:
    load_policy(str(path))


def _key(path: Path) -> None:
    load_private(path)


READERS = {"trust policy": _trust, "qualification policy": _policy, "signing key": _key}


@contextlib.contextmanager
def bounded():
    """Fails the test past SECONDS or PEAK_BYTES of Python allocations."""
    def stop(_signum, _frame):
        raise TimeoutError(f"no answer within {SECONDS} s")
    previous = signal.signal(signal.SIGALRM, stop)
    signal.alarm(SECONDS)
    tracemalloc.start()
    try:
        yield
        assert tracemalloc.get_traced_memory()[1] < PEAK_BYTES
    finally:
        tracemalloc.stop()
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _bomb(levels: int = 9, width: int = 9) -> str:
    names = [f"l{i}" for i in range(levels + 1)]
    lines = [f"{names[0]}: &{names[0]} [{', '.join(['lol'] * width)}]"]
    lines += [f"{names[i]}: &{names[i]} [{', '.join([f'*{names[i - 1]}'] * width)}]"
              for i in range(1, levels + 1)]
    return "\n".join(lines) + "\n"


def _bomb_in_policy() -> str:
    # the bomb where the trust policy's own keys are, so the parse is what must refuse it
    return "identities:\n  ci: &a {may: [seal], public_key_pem: x, accounts: [" + \
        ", ".join(["q"] * 50) + "]}\n" + _bomb()


HOSTILE = {
    "alias bomb": (_bomb(), r"more than 100,000 values \(an alias bomb\?\)"),
    "alias bomb in a policy": (_bomb_in_policy(), r"an alias bomb"),
    "20,000 deep (flow)": ("[" * 20_000 + "]" * 20_000, r"nests deeper than 64 levels"),
    "deep (block)": ("a:\n" + "".join("  " * i + "- x:\n" for i in range(1, 200)),
                     r"nests deeper than 64 levels"),
    "recursive alias": ("identities: &a {x: *a}\n", r"refers to a node that holds it"),
    "huge integer": ("identities: " + "9" * 10_000 + "\n", r"a value in it cannot be read"),
    "two documents": ("a: 1\n---\nb: 2\n", r"not valid YAML"),
    "NUL bytes": ("a: \x00\n", r"not valid YAML"),
}


@pytest.mark.parametrize("reader", ["trust policy", "qualification policy"])
@pytest.mark.parametrize("case", list(HOSTILE))
def test_a_hostile_yaml_document_is_one_clear_error_in_bounded_time(tmp_path, reader, case):
    text, match = HOSTILE[case]
    path = tmp_path / "hostile.yml"
    path.write_text(text, encoding="utf-8")
    with bounded(), pytest.raises(UsageError, match=match) as caught:
        READERS[reader](path)
    assert "hostile.yml" in str(caught.value)


@pytest.mark.parametrize("reader", list(READERS))
def test_a_fifo_is_refused_without_blocking(tmp_path, reader):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with bounded(), pytest.raises(UsageError, match=r"pipe is a FIFO, not a regular "
                                                    r"file: mlpipe reads only regular files"):
        READERS[reader](fifo)


@pytest.mark.parametrize("reader", list(READERS))
@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom", "/dev/null"])
def test_a_device_is_refused_without_reading_it(reader, device):
    with bounded(), pytest.raises(UsageError, match=rf"{device} is a character device, not a "
                                                    rf"regular file"):
        READERS[reader](Path(device))


@pytest.mark.parametrize("reader", list(READERS))
def test_a_folder_is_refused(tmp_path, reader):
    with bounded(), pytest.raises(UsageError, match=r"is a folder, not a regular file"):
        READERS[reader](tmp_path)


@pytest.mark.parametrize("reader", list(READERS))
def test_a_huge_file_is_refused_by_its_size_before_it_is_read(tmp_path, reader):
    huge = tmp_path / "huge.yml"
    with huge.open("wb") as fh:   # sparse: 8 GiB on no disk
        fh.truncate(8 << 30)
    limit = userfiles.KEY_BYTES if reader == "signing key" else userfiles.MAX_BYTES
    with bounded(), pytest.raises(UsageError, match=rf"huge\.yml is 8,589,934,592 bytes, more "
                                                    rf"than the {limit:,} mlpipe reads"):
        READERS[reader](huge)


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=4096), reader=st.sampled_from(list(READERS)))
def test_random_bytes_are_one_clear_error(tmp_path, data, reader):
    path = tmp_path / "random.bin"
    path.write_bytes(data)
    with bounded(), pytest.raises(UsageError, match=r"random\.bin"):
        READERS[reader](path)


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(levels=st.integers(2, 12), width=st.integers(2, 12),
       reader=st.sampled_from(["trust policy", "qualification policy"]))
def test_any_alias_bomb_is_refused_or_small(tmp_path, levels, width, reader):
    path = tmp_path / "bomb.yml"
    path.write_text(_bomb(levels, width), encoding="utf-8")
    expanded = sum(width ** i for i in range(1, levels + 2))
    match = r"an alias bomb" if expanded > userfiles.MAX_NODES else r"bomb\.yml"
    with bounded(), pytest.raises(UsageError, match=match):
        READERS[reader](path)


@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(depth=st.integers(1, 30_000), flow=st.booleans())
def test_any_nesting_is_refused_past_the_limit_or_read(tmp_path, depth, flow):
    path = tmp_path / "deep.yml"
    text = ("[" * depth + "]" * depth if flow
            else "".join("  " * i + "- \n" for i in range(min(depth, 3000))))
    path.write_text(text, encoding="utf-8")
    too_deep = (depth if flow else min(depth, 3000)) > userfiles.MAX_DEPTH
    big = len(text.encode()) > userfiles.MAX_BYTES
    with bounded(), pytest.raises(UsageError, match=r"more than the 1,048,576" if big
                                  else r"nests deeper than 64" if too_deep else r"deep\.yml"):
        load_policy(str(path))


def test_a_bounded_document_reads_as_safe_load_reads_it():
    text = "a: &x [1, {b: 2}]\nc: *x\nd: 2026-12-06\n"
    import yaml

    assert userfiles.load_yaml(text, file="p.yml", hint="") == yaml.safe_load(text)


def test_a_private_key_others_may_read_is_refused_as_ssh_refuses_it(tmp_path):
    path = tmp_path / "k.pem"
    generate(path)
    assert load_private(path).keyid
    for mode in (0o640, 0o604, 0o660):
        path.chmod(mode)
        with pytest.raises(UsageError, match=rf"k\.pem may be read by its group or others "
                                             rf"\(mode {mode:04o}\): a private key is its "
                                             rf"owner's alone"):
            load_private(path)
    path.chmod(0o400)
    assert load_private(path).keyid


@pytest.mark.slow
@pytest.mark.parametrize("case", ["fifo", "/dev/zero", "huge", "random"])
def test_keys_show_on_a_hostile_file_says_one_line(tmp_path, case):
    target = {"/dev/zero": "/dev/zero"}.get(case, str(tmp_path / case))
    if case == "fifo":
        os.mkfifo(target)
    elif case == "huge":
        with open(target, "wb") as fh:
            fh.truncate(1 << 30)
    elif case == "random":
        Path(target).write_bytes(os.urandom(2000))
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "mlpipe.cli", "keys", "show", target],
                          capture_output=True, text=True, timeout=60)
    assert time.monotonic() - started < 60
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith("error: ") and target in done.stderr.splitlines()[0]


def _job(path: Path) -> None:
    from mlpipe.backends.azure import yamlfile

    yamlfile.load(path, "an Azure ML pipeline job YAML")


@pytest.mark.parametrize("case, match", [
    ("fifo", r"pipe is not a regular file"),
    ("/dev/zero", r"/dev/zero is not a regular file"),
    ("huge", r"huge\.yml is 8,589,934,592 bytes, more than the 8,388,608 mlpipe reads"),
    ("deep", r"nests collections more than 100 levels deep"),
    ("bomb", r"expands to more than 1,000,000 values through its YAML aliases"),
])
def test_a_hostile_job_file_is_one_clear_error_in_bounded_time(tmp_path, case, match):
    from mlpipe.errors import LoadError

    path = {"fifo": tmp_path / "pipe", "/dev/zero": Path("/dev/zero"),
            "huge": tmp_path / "huge.yml", "deep": tmp_path / "deep.yml",
            "bomb": tmp_path / "bomb.yml"}[case]
    if case == "fifo":
        os.mkfifo(path)
    elif case == "huge":
        with path.open("wb") as fh:
            fh.truncate(8 << 30)
    elif case == "deep":   # 500,000 open brackets, stopped at the 101st
        path.write_text("jobs: " + "[" * 500_000)
    elif case == "bomb":
        path.write_text(_bomb(7, 10))
    with bounded(), pytest.raises(LoadError, match=match):
        _job(path)


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=4096))
def test_a_job_file_of_random_bytes_is_one_clear_error(tmp_path, data):
    from mlpipe.errors import LoadError

    path = tmp_path / "random.yml"
    path.write_bytes(data)
    with bounded(), contextlib.suppress(LoadError):
        _job(path)
