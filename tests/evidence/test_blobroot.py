"""An Azure Blob Storage container as the shared artifact root, against Azurite (the official
emulator, on loopback): artifacts round-trip whole, a cut-short or damaged upload is never used,
and two homes on "two machines" (two folders, one store, one container) reuse each other's steps
and verify each other's candidates."""
from __future__ import annotations

import secrets
import shutil
import subprocess
import sys

import pytest

from azurite import azurite, new_container  # noqa: F401  (the fixture)
from mlpipe.digests.snapshot import snapshot
from mlpipe.errors import UsageError
from mlpipe.evidence.storage.blobroot import RECORD, BlobRoot
from mlpipe.evidence.storage.roots import ArtifactRoots, key_of, shared_root
from store_urls import store_url_for
from team_project import Home, statuses


@pytest.fixture
def container(azurite, monkeypatch):  # noqa: F811
    name = f"mlpipe-{secrets.token_hex(4)}"
    new_container(azurite, name)
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", azurite)
    return f"azure-blob://{name}/team/artifacts"


def _filed(root, name, make):
    """An artifact made by ``make(path)``, filed in ``root`` under its key."""
    scratch = root.parent / f"scratch-{secrets.token_hex(3)}" / name
    scratch.parent.mkdir(parents=True)
    make(scratch)
    snap = snapshot(scratch)
    key = key_of(snap.digest, name)
    (root / key).parent.mkdir(parents=True)
    shutil.move(scratch, root / key)
    return key, snap.digest


def _folder(path):
    (path / "sub" / "deeper").mkdir(parents=True)
    (path / "empty").mkdir()
    (path / "MLmodel").write_text("flavors: {}\n")
    (path / "sub" / "deeper" / "weights.bin").write_bytes(bytes(range(256)) * 40)


def test_a_folder_and_a_file_round_trip_through_the_container(container, tmp_path):
    ana = ArtifactRoots(tmp_path / "ana", shared_root(container))
    ben = ArtifactRoots(tmp_path / "ben", shared_root(container))
    folder_key, folder_digest = _filed(ana.own, "model", _folder)
    file_key, file_digest = _filed(ana.own, "report", lambda p: p.write_text('{"a": 1}'))
    assert ana.publish(folder_key) is None and ana.publish(file_key) is None
    assert sorted(ben.shared.keys()) == sorted([folder_key, file_key])
    assert ben.resolve(folder_key, folder_digest) == ben.own / folder_key
    assert ben.resolve(file_key, file_digest) == ben.own / file_key
    assert (ben.own / folder_key / "empty").is_dir()
    assert snapshot(ben.own / folder_key).digest == folder_digest
    assert ana.publish(folder_key) is None  # already there: nothing uploaded again


def test_a_cut_short_or_damaged_upload_is_never_used(container, tmp_path):
    ana = ArtifactRoots(tmp_path / "ana", shared_root(container))
    key, digest = _filed(ana.own, "model", _folder)
    assert ana.publish(key) is None
    blob = ana.shared
    blob.container.upload_blob(f"{blob.prefix}{key}/MLmodel", b"tampered", overwrite=True)
    ben = ArtifactRoots(tmp_path / "ben", shared_root(container))
    assert ben.resolve(key, digest) is None
    assert not (ben.own / key).exists()  # nothing damaged left behind either
    blob.container.delete_blob(f"{blob.prefix}{key.rsplit('/', 1)[0]}/{RECORD}")
    assert not ben.shared.has(key)  # no record: an upload cut short is not there
    assert ben.resolve(key, digest) is None


def test_an_unreachable_container_means_re_run_not_failure(tmp_path, monkeypatch):
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING",
                       "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey="
                       "a2V5;BlobEndpoint=http://127.0.0.1:1/devstoreaccount1;")
    roots = ArtifactRoots(tmp_path / "own", BlobRoot.from_url("azure-blob://nowhere"))
    key = key_of("blake3:" + "ab" * 32, "model")
    assert roots.resolve(key, "blake3:" + "ab" * 32) is None


@pytest.mark.parametrize(("spec", "env", "message"), [
    ("azure-blob://team", {}, "the shared artifact root azure-blob://team names a container "
                              "but AZURE_STORAGE_CONNECTION_STRING is not set"),
    ("s3://bucket/x", {}, "the shared artifact root 's3://bucket/x' is neither a folder nor an "
                          "Azure Blob Storage container URL"),
    ("azure-blob:///x", {"AZURE_STORAGE_CONNECTION_STRING": "UseDevelopmentStorage=true"},
     "the shared artifact root 'azure-blob:///x' names no container"),
])
def test_a_bad_container_setting_is_one_clear_line(spec, env, message, monkeypatch, tmp_path):
    monkeypatch.delenv("AZURE_STORAGE_CONNECTION_STRING", raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace(")", r"\)")):
        shared_root(spec)
    (tmp_path / "mlpipe.toml").write_text(f'[artifacts]\nshared = "{spec}"\n')
    (tmp_path / "p.py").write_text("from mlpipe import pipeline\n\n@pipeline\ndef p():\n"
                                   "    pass\n")
    done = subprocess.run([sys.executable, "-m", "mlpipe.cli", "submit", "p.py"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120,
                          env={**dict(__import__("os").environ), **env})
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"error: {message}"), done.stderr


@pytest.fixture(params=[pytest.param("sqlite", id="sqlite"),
                        pytest.param("postgresql", id="postgresql", marks=pytest.mark.slow)])
def store(request, tmp_path):
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'team-store.sqlite'}"
        return
    url, cleanup = store_url_for("postgresql", tmp_path)
    yield url
    cleanup()


@pytest.mark.slow
def test_two_machines_one_store_one_container(store, container, azurite, tmp_path):  # noqa: F811
    data = tmp_path / "team-data.txt"
    data.write_text("1 2 3 4 5 6 7 8\n")
    env = {"AZURE_STORAGE_CONNECTION_STRING": azurite}
    ana = Home(tmp_path / "machine-a" / "proj", store, container, data, env)
    ben = Home(tmp_path / "machine-b" / "proj", store, container, data, env)
    first, _ = ana.submit()
    sealed = ana.bundle(first)
    shutil.move(tmp_path / "machine-a", tmp_path / "machine-a-away")  # ben cannot see it
    second, progress = ben.submit()
    assert statuses(progress) == {"reused"}, progress
    done = ben.verify(first)
    assert done.returncode == 0, done.stdout
    seen = ben.bundle(first)  # the same artifacts, by key, and the same model files
    assert (seen["predicate"]["artifacts"], seen["subject"]) == (
        sealed["predicate"]["artifacts"], sealed["subject"])
    shutil.move(tmp_path / "machine-a-away", tmp_path / "machine-a")
    shutil.rmtree(ana.own)  # ana's own copies are gone: the container has them
    done = ana.verify(second)
    assert done.returncode == 0, done.stdout
    _third, progress = ana.submit()
    assert statuses(progress) == {"reused"}, progress


@pytest.mark.slow
def test_inputs_each_machine_read_in_its_own_folder_verify_through_the_container(
        store, container, azurite, tmp_path):  # noqa: F811
    """The data lives in each machine's own folder: the first machine's input snapshot is
    published to the container by content, so the second verifies it once the first is gone."""
    env = {"AZURE_STORAGE_CONNECTION_STRING": azurite}
    homes = []
    for machine in ("machine-a", "machine-b"):
        data = tmp_path / machine / "data.txt"
        data.parent.mkdir(parents=True)
        data.write_text("1 2 3 4 5 6 7 8\n")
        homes.append(Home(tmp_path / machine / "proj", store, container, data, env))
    ana, ben = homes
    first, _ = ana.submit()
    shutil.move(tmp_path / "machine-a", tmp_path / "machine-a-away")
    second, progress = ben.submit()
    assert statuses(progress) == {"reused"}, progress
    done = ben.verify(first)
    assert done.returncode == 0, done.stdout + done.stderr
    assert ben.verify(second).returncode == 0
