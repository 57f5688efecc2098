"""Param[Secret]: the value reaches the step, in memory only, and is written down nowhere but as
its keyed hash: not in the store (SQLite and PostgreSQL), the evidence bundle, the step's log,
its ranks' logs, its failure message, `show`/`diff`/`runs`, nor an Azure ML export. Reuse keys
on the hash. Real CLI processes, real step processes, real stores."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Annotated

import pytest
import sqlalchemy as sa
from click.testing import CliRunner
from hypothesis import assume, given
from hypothesis import strategies as st

from mlpipe import Input, Output, Param, Secret, component, pipeline
from mlpipe.backends.local.inputs import resolve
from mlpipe.errors import DefinitionError, UsageError
from mlpipe.params import check_value
from mlpipe.secret import HASH_PREFIX, MIN_REDACTED, Redactor, keyed_hash
from mlpipe.spec import ParamSpec, ParamType
from store_urls import store_url  # noqa: F401  (the fixture)

PROJECT = Path(__file__).parent / "fixtures" / "secrets" / "project.py"
TOKEN = "hub-s3cr3t-7f3a9c41e2"
OTHER = "hub-s3cr3t-0b8d5e6f17"


# --- the value and its hash -------------------------------------------------------------------

def test_a_secret_is_a_str_whose_repr_hides_it():
    token = Secret(TOKEN)
    assert token == TOKEN and isinstance(token, str) and f"{token}" == TOKEN
    assert repr(token) == "Secret('***')" and TOKEN not in repr([token, {"t": token}])


@given(st.text(min_size=1), st.binary(min_size=16, max_size=32),
       st.binary(min_size=16, max_size=32))
def test_the_hash_is_keyed(value, key, other_key):
    hashed = keyed_hash(key, value)
    assert re.fullmatch(re.escape(HASH_PREFIX) + "[0-9a-f]{64}", hashed)
    assert keyed_hash(key, value) == hashed
    if other_key != key:
        assert keyed_hash(other_key, value) != hashed


@given(st.text(min_size=MIN_REDACTED), st.text(), st.text())
def test_redaction_leaves_no_whole_secret_between_its_masks(value, before, after):
    text = f"{before}{value}{after}{value}"
    masked = Redactor({"token": value}).text(text)
    assert all(value not in piece for piece in masked.split("[secret token]"))
    assert masked.count("[secret token]") >= 1


def test_redaction_masks_the_longer_of_two_secrets_whole_and_leaves_short_values():
    redact = Redactor({"key": "abcd1234", "part": "1234", "pin": "42"})
    assert redact.text("k=abcd1234 p=1234 pin=42") == "k=[secret key] p=[secret part] pin=42"
    assert redact.data(b"k=abcd1234 p=1234") == b"k=[secret key] p=[secret part]"


def test_the_escaped_forms_of_a_secret_are_masked_too():
    pem = "-----BEGIN KEY-----\nMIIEvQ\n-----END KEY-----"
    quoted = Secret("pa\\ss\"w0rd-quote'x\xa0nb")  # both quotes, a non-breaking space
    redact = Redactor({"key": Secret(pem), "pw": quoted})
    for shown in (str(KeyError(pem)), repr([pem]), json.dumps({"k": pem}),
                  str(KeyError(str(quoted))), repr(str(quoted)), json.dumps(quoted),
                  repr({"k": str(quoted)})):
        masked = redact.text(shown)
        assert pem not in masked and quoted not in masked and "MIIEvQ" not in masked
        assert "w0rd" not in masked, masked


@given(st.text(min_size=MIN_REDACTED, max_size=12), st.text(max_size=40),
       st.lists(st.integers(min_value=1, max_value=9), max_size=12))
def test_a_stream_masked_in_pieces_is_masked_as_a_whole(value, text, cuts):
    # a value that overlaps itself ("0000" in "00000") may be cut where a whole pass would
    # not; a secret worth the name (a key, a token) does not
    encoded = value.encode("utf-8", "surrogatepass")
    assume(all(encoded[:k] != encoded[-k:] for k in range(1, len(encoded))))
    redact = Redactor({"token": value})
    whole = f"{text}{value}{text}{value[:-1]}".encode("utf-8", "surrogatepass")
    pieces, at = [], 0
    for cut in cuts:
        pieces.append(whole[at:at + cut])
        at += cut
    pieces.append(whole[at:])
    mask = redact.stream()
    streamed = b"".join(mask.feed(piece) for piece in pieces) + mask.close()
    assert streamed == redact.data(whole)


def test_a_file_is_masked_in_place_and_left_alone_without_the_secret(tmp_path):
    log = tmp_path / "step.log"
    log.write_bytes(f"token {TOKEN}\n\xe9t\xe9\n".encode("latin-1"))
    assert Redactor({"token": TOKEN}).file(log)
    assert log.read_bytes() == "token [secret token]\n\xe9t\xe9\n".encode("latin-1")
    assert not Redactor({"token": TOKEN}).file(log) and not Redactor({}).file(log)


# --- declaring one ----------------------------------------------------------------------------

def test_a_secret_is_declared_typed_bare_or_with_a_description():
    @component
    def pull(out: Output["uri_file"], a: Param[Secret], b: Secret,
             c: Annotated[Secret, "the hub's token"], d: Param[Secret] = None): ...

    params = {p.name: p for p in pull.spec.params}
    assert {p.type for p in params.values()} == {ParamType.SECRET}
    assert params["c"].description == "the hub's token"
    assert params["d"].required is False and params["d"].default is None


def test_a_secret_with_a_default_or_a_constraint_is_refused_without_showing_it():
    with pytest.raises(DefinitionError) as err:
        @component
        def pull(out: Output["uri_file"], token: Param[Secret] = TOKEN): ...

        pull.spec
    assert err.value.message == (
        "parameter 'token' of component 'pull' is a Secret with a default value; a value "
        "written in the code is in its source, its digest and the code revision in clear")
    assert err.value.hint == ("remove the default and give the value when submitting (--secret "
                              "token=ENV_VAR); a default of None makes it optional")
    assert TOKEN not in err.value.render()
    with pytest.raises(DefinitionError, match=r"Param\[Secret\] takes no range or choices"):
        @component
        def pick(out: Output["uri_file"], token: Param[Secret, ["a", "b"]]): ...

        pick.spec


def test_a_pipeline_secret_with_a_default_is_refused():
    @component
    def pull(out: Output["uri_file"], token: Param[Secret]): ...

    @pipeline
    def pulled(token=TOKEN):
        return pull(token=token).out

    with pytest.raises(DefinitionError) as err:
        pulled.spec
    assert err.value.message == (
        "pipeline input 'token' is a Secret with a default value; a value written in the code "
        "is in its source, its digest and the code revision in clear")
    assert TOKEN not in err.value.render()


def test_a_value_that_is_no_text_is_refused_without_being_quoted():
    spec = ParamSpec("token", ParamType.SECRET)
    assert check_value(spec, TOKEN) is None
    assert check_value(spec, 41735).message == "a secret is given as text, not as an int"


# --- giving one -------------------------------------------------------------------------------

@component
def pull_hub(src: Input["uri_file"], out: Output["uri_file"], token: Param[Secret],
          epochs: int = 1): ...


@pipeline
def pulled_hub(src, token: Param[Secret], epochs: int = 1):
    return pull_hub(src=src, token=token, epochs=epochs).out


def test_a_secret_given_for_a_plain_parameter_or_missing_is_refused(tmp_path):
    (tmp_path / "in.txt").write_text("x")
    src = {"src": str(tmp_path / "in.txt")}
    with pytest.raises(UsageError) as err:
        resolve(pulled_hub.spec, src, {"token": Secret(TOKEN), "epochs": Secret("12345")})
    assert err.value.render() == (
        "--secret epochs: parameter 'epochs' of pipeline 'pulled_hub' is not a Secret (int); its "
        "value would be recorded in clear\n  help: declare it Param[Secret] if it is one, else "
        "pass it with --param epochs=VALUE")
    with pytest.raises(UsageError) as err:
        resolve(pulled_hub.spec, src, {})
    assert err.value.render() == ("pipeline 'pulled_hub' needs --secret token=...\n"
                                  "  help: pass --secret token=ENV_VAR")
    with pytest.raises(UsageError) as err:
        resolve(pulled_hub.spec, src, {"token": 41735})
    assert err.value.message == "--param token=***: a secret is given as text, not as an int"
    _, values = resolve(pulled_hub.spec, src, {"token": Secret(TOKEN)})
    assert values["token"] == TOKEN and isinstance(values["token"], Secret)


@component
def plain_hub(src: Input["uri_file"], out: Output["uri_file"], token: Param[str] = ""): ...


@pipeline
def unused_secret(src, token: Param[Secret]):
    return plain_hub(src=src).out


def test_secret_options_say_what_is_wrong(tmp_path, monkeypatch):
    from mlpipe.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("NO_SUCH_TOKEN", raising=False)
    monkeypatch.setenv("EMPTY_TOKEN", "")
    runner = CliRunner()
    cases = {
        ("--secret", "token=NO_SUCH_TOKEN"): (
            "error: --secret token=...: the environment variable NO_SUCH_TOKEN is not set\n"
            "  help: set NO_SUCH_TOKEN (from your secret store or your CI's secrets) before "
            "submitting\n"),
        ("--secret", "token=EMPTY_TOKEN"): (
            "error: --secret token=...: the environment variable EMPTY_TOKEN is empty\n"
            "  help: set EMPTY_TOKEN (from your secret store or your CI's secrets) before "
            "submitting\n"),
        ("--secret", "token=hunter2isMine"): (  # unset, and not a conventional name: not shown
            "error: --secret token=...: the environment variable it names is not set\n"
            "  help: set that variable (from your secret store or your CI's secrets) before "
            "submitting\n"),
        ("--secret", f"token={TOKEN}"): (  # the secret itself where its variable belongs
            "error: --secret token=...: what follows '=' is not the name of an environment "
            "variable (letters, digits and _)\n  help: write --secret token=ENV_VAR, naming "
            "the variable that holds the secret, not the secret\n"),
        ("--secret", TOKEN): (
            "error: --secret one of them is not NAME=ENV_VAR\n  help: write --secret "
            "name=ENV_VAR\n"),
        ("--param", "token=a", "--param", "token=b"): (
            "error: --param token is given twice\n  help: give --param token=... once\n"),
        ("--secret", "token=HOME", "--param", "token=x"): (
            "error: 'token' is given both by --param and by --secret\n  help: give it once, with "
            "--secret token=ENV_VAR\n"),
        ("--secret", "token=HOME", "--target", "azure"): (
            "error: --secret applies to --target local only: mlpipe never sends a secret to "
            "Azure ML, where a job holds every input value in clear\n  help: have the step read "
            "the secret at run time from the workspace's Key Vault (azure-keyvault-secrets, with "
            "the compute's managed identity), or run the pipeline here (mlpipe submit, --target "
            "local)\n"),
    }
    for args, said in cases.items():
        done = runner.invoke(main, ["submit", "p.py", *args])
        assert (done.exit_code, done.output) == (2, said), args
    assert not (tmp_path / "evidence").exists()


def test_the_store_key_is_made_once_whoever_asks_first(store_url):  # noqa: F811
    from mlpipe.evidence.storage.store import Store

    stores = [Store.open(store_url) for _ in range(8)]
    keys: list[bytes] = []
    threads = [threading.Thread(target=lambda s=s: keys.append(s.secret_key())) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    again = Store.open(store_url)
    try:
        assert len(keys) == 8 and len(set(keys)) == 1 and len(keys[0]) == 32
        assert again.secret_key() == keys[0]
    finally:
        for s in [*stores, again]:
            s.close()


# --- Azure ML ---------------------------------------------------------------------------------

def test_neither_compile_nor_submit_writes_a_secret_for_azure_ml(tmp_path):
    from mlpipe.backends.azure.export import ExportError, export_pipeline
    from mlpipe.backends.azure.submit import submit_to_azure

    said = ("pipeline 'pulled_hub' takes 'token', 'pull_hub.token' as Param[Secret], which "
            "mlpipe does "
            "not write into Azure ML YAML: a job there holds every input value in clear\n"
            "  help: have the step read the secret at run time from the workspace's Key Vault "
            "(azure-keyvault-secrets, with the compute's managed identity), or run the pipeline "
            "here (mlpipe submit, --target local)")
    for inputs in ({"src": "azureml:raw:1"}, {"src": "azureml:raw:1", "token": TOKEN}):
        with pytest.raises(ExportError) as err:  # a Secret the steps do not even use
            export_pipeline(unused_secret.spec, out_dir=tmp_path, inputs=inputs)
        assert err.value.message.startswith("pipeline 'unused_secret' takes 'token' as "
                                             "Param[Secret], which mlpipe does not write")
        with pytest.raises(ExportError) as err:
            export_pipeline(pulled_hub.spec, out_dir=tmp_path, inputs=inputs)
        assert err.value.render() == said
        with pytest.raises(ExportError) as err:  # before a workspace or the store is touched
            submit_to_azure(pulled_hub.spec, None, None, inputs=inputs)
        assert err.value.render() == said
    assert list(tmp_path.iterdir()) == []


# --- a real run -------------------------------------------------------------------------------

def _cli(root: Path, url: str, *args: str, token: str | None = TOKEN,
         env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items()
               if k not in ("MLPIPE_HOME", "MLPIPE_ARTIFACT_ROOT", "MLPIPE_SHARED_ARTIFACTS",
                            "HUB_TOKEN")}
    environ["MLPIPE_STORE_URL"] = url
    if token is not None:
        environ["HUB_TOKEN"] = token
    environ.update(env or {})
    return subprocess.run([sys.executable, "-m", "mlpipe.cli", *args], cwd=root, env=environ,
                          capture_output=True, text=True, timeout=240)


def _project(tmp_path: Path, data: str = "1 2 3 4\n") -> Path:
    root = tmp_path / "home"
    root.mkdir()
    shutil.copy(PROJECT, root / "project.py")
    (root / "data.txt").write_text(data)
    return root


def _store_text(url: str) -> str:
    """Every row of every table, as text."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return "\n".join(repr(conn.execute(sa.text(f'SELECT * FROM "{table}"')).all())
                             for table in sa.inspect(conn).get_table_names())
    finally:
        engine.dispose()


def _written_nowhere(root: Path, url: str, *secrets: str) -> None:
    text = _store_text(url)
    assert HASH_PREFIX in text
    for secret in secrets:
        assert secret not in text, "the store holds a secret"
        for path in root.rglob("*"):
            if path.is_file():
                assert secret.encode() not in path.read_bytes(), f"{path} holds a secret"


def _steps(stderr: str) -> dict[str, str]:
    return dict(re.findall(r"^\[\d+/\d+\] +(\S+) +(executed|reused|failed)\b", stderr, re.M))


@pytest.mark.slow
def test_a_secret_reaches_its_step_and_only_its_hash_is_written_down(tmp_path, store_url):  # noqa: F811
    import hashlib

    root = _project(tmp_path)
    first = _cli(root, store_url, "submit", "project.py:fetched", "--input", "data=data.txt",
                 "--secret", "token=HUB_TOKEN", env={"MLPIPE_FORKSERVER": "0"})
    assert first.returncode == 0, first.stderr
    candidate = re.search(r"^candidate (c-[0-9a-f]+)$", first.stdout, re.M).group(1)
    run = re.search(r"^run (r-[0-9a-f]+) succeeded$", first.stdout, re.M).group(1)
    fetched = next(p for p in (root / "evidence" / "artifacts").rglob("*")
                   if p.is_file() and b"token_sha256" in p.read_bytes())
    assert json.loads(fetched.read_text())["token_sha256"] == hashlib.sha256(
        TOKEN.encode()).hexdigest()
    log = next((root / "evidence" / "logs" / run).glob("fetch.log")).read_text()
    assert "fetching with token [secret token]\nand again [secret token]\n" in log
    assert "logged with token [secret token]\n" in log  # a handler made at import time
    assert "child has token [secret token]\n" in log   # a child process's output

    # the same secret reuses (also from a fork-server step); another one runs again
    again = _cli(root, store_url, "submit", "project.py:fetched", "--input", "data=data.txt",
                 "--secret", "token=HUB_TOKEN")
    assert _steps(again.stderr) == {"fetch": "reused", "fit": "reused", "score": "reused"}
    other = _cli(root, store_url, "submit", "project.py:fetched", "--input", "data=data.txt",
                 "--secret", "token=HUB_TOKEN", token=OTHER)
    assert _steps(other.stderr)["fetch"] == "executed", other.stderr
    other_run = re.search(r"^run (r-[0-9a-f]+) succeeded$", other.stdout, re.M).group(1)

    shown = [_cli(root, store_url, *args) for args in (
        ("show", run), ("runs", "--format", "json"), ("diff", run, other_run),
        ("evidence", candidate), ("evidence", candidate, "--format", "json"),
        ("logs", run, "fetch"))]
    # diff exits 1: the two runs differ (their tokens' hashes), as diff(1)
    assert [d.returncode for d in shown] == [0, 0, 1, 0, 0, 0], [d.stderr for d in shown]
    assert re.search(r"token='secret:hmac-sha256:[0-9a-f]{64}'", shown[0].stdout)
    assert re.search(r"token: 'secret:hmac-sha256:[0-9a-f]{64}' -> 'secret:hmac-sha256:"
                     r"[0-9a-f]{64}'", shown[2].stdout)
    assert HASH_PREFIX in shown[4].stdout
    for done in [first, again, other, *shown]:
        assert TOKEN not in done.stdout + done.stderr and OTHER not in done.stdout + done.stderr
    _written_nowhere(root, store_url, TOKEN, OTHER)


@pytest.mark.slow
def test_a_step_that_prints_its_secret_in_a_failure_is_masked(tmp_path):
    root = _project(tmp_path, data="fail\n")
    url = f"sqlite:///{root / 'evidence' / 'store.sqlite'}"
    failed = _cli(root, url, "submit", "project.py:fetched", "--input", "data=data.txt",
                  "--secret", "token=HUB_TOKEN")
    assert failed.returncode == 1
    assert ("error: run r-" in failed.stderr and "step 'fetch' failed: ValueError: the hub "
            "refused token [secret token]" in failed.stderr)
    assert "| ValueError: the hub refused token [secret token]" in failed.stderr
    assert TOKEN not in failed.stdout + failed.stderr
    _written_nowhere(root, url, TOKEN)


@pytest.mark.slow
def test_a_distributed_steps_ranks_get_the_secret_and_their_logs_mask_it(tmp_path):
    import hashlib

    root = _project(tmp_path)
    url = f"sqlite:///{root / 'evidence' / 'store.sqlite'}"
    done = _cli(root, url, "submit", "project.py:ranks", "--input", "data=data.txt",
                "--secret", "token=HUB_TOKEN")
    assert done.returncode == 0, done.stderr
    logs = root / "evidence" / "logs"
    ranks = sorted(p.read_text() for p in logs.rglob("rank-*.log"))
    assert ranks == ["rank 0 has token [secret token]\n", "rank 1 has token [secret token]\n"]
    written = [p for p in (root / "evidence" / "artifacts").rglob("*") if p.is_file()
               and p.read_bytes() == hashlib.sha256(TOKEN.encode()).hexdigest().encode()]
    assert written
    _written_nowhere(root, url, TOKEN)


@pytest.mark.slow
def test_an_escaped_secret_in_a_failure_is_masked_and_a_short_one_leaves_the_record_whole(
        tmp_path):
    pem = "-----BEGIN KEY-----\nMIIEvQ-s3cr3t-body\n-----END KEY-----"
    root = _project(tmp_path, data="key\n")
    url = f"sqlite:///{root / 'evidence' / 'store.sqlite'}"
    failed = _cli(root, url, "submit", "project.py:fetched", "--input", "data=data.txt",
                  "--secret", "token=HUB_TOKEN", token=pem)
    assert failed.returncode == 1 and "KeyError: '[secret token]'" in failed.stderr
    assert "MIIEvQ" not in failed.stdout + failed.stderr
    _written_nowhere(root, url, "MIIEvQ-s3cr3t-body")

    # a secret that is also a word of the step record: masked in the log, never in the record
    other = tmp_path / "other"
    other.mkdir()
    root = _project(other)
    url = f"sqlite:///{root / 'evidence' / 'store.sqlite'}"
    done = _cli(root, url, "submit", "project.py:fetched", "--input", "data=data.txt",
                "--secret", "token=HUB_TOKEN", token="record")
    assert done.returncode == 0, done.stderr
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        stored = conn.execute(sa.text("SELECT record FROM step_runs WHERE step = 'fetch'")
                              ).scalar_one()
    engine.dispose()
    record = json.loads(stored) if isinstance(stored, str) else stored
    assert record["format"] == "mlpipe.step-record"
    assert record["step"]["format"] == "mlpipe.step-record.step"


@pytest.mark.slow
def test_a_secret_too_large_or_not_text_is_refused_before_anything_is_recorded(tmp_path):
    root = _project(tmp_path)
    url = f"sqlite:///{root / 'evidence' / 'store.sqlite'}"
    big = _cli(root, url, "submit", "project.py:fetched", "--input", "data=data.txt",
               "--secret", "token=HUB_TOKEN", token="秘" * 40_000)
    assert big.returncode == 2
    assert big.stderr == (
        "error: the secrets given (token) weigh 117 KiB; a step gets its secrets in one "
        "environment variable, and 96 KiB is the most mlpipe passes there\n  help: give the "
        "step a smaller secret, e.g. a key or token that unlocks the large one at run time\n")
    binary = _cli(root, url, "submit", "project.py:fetched", "--input", "data=data.txt",
                  "--secret", "token=HUB_TOKEN", token="abc\udcff\udcfedef-binary")
    assert binary.returncode == 2
    assert binary.stderr.startswith("error: --secret token=...: the environment variable "
                                    "HUB_TOKEN holds bytes that are not UTF-8 text\n")
    assert not (root / "evidence" / "store.sqlite").exists() or "r-" not in _store_text(url)


def test_a_long_secret_split_across_pieces_is_held_back_until_it_is_whole():
    import secrets as random_bytes

    value = random_bytes.token_urlsafe(60_000)  # 80 KB, longer than any pipe read
    redact = Redactor({"token": value})
    data = b"x" * 65_000 + value.encode() + b" end\n"
    mask = redact.stream()
    out = [mask.feed(data[i:i + 65_536]) for i in range(0, len(data), 65_536)]
    assert value.encode()[:40] not in b"".join(out)  # nothing of it before the end
    assert b"".join(out) + mask.close() == b"x" * 65_000 + b"[secret token] end\n"
