"""A team store: two project folders ("two homes": two people, or two machines) share one
evidence store and one shared artifact root. Each resolves artifact keys against its OWN root,
fetches what it lacks from the shared root, re-runs what no root has, and never reads the other
home's folder: the other home is moved away before it is relied on."""
from __future__ import annotations

import shutil

import pytest

from store_urls import store_url_for
from team_project import Home, statuses

HOMES = [pytest.param("sqlite", id="sqlite-shared-folder"),
         pytest.param("postgresql", id="postgresql", marks=pytest.mark.slow)]


@pytest.fixture(params=HOMES)
def team(request, tmp_path):
    """(store URL, shared root, shared data file): SQLite in a shared folder, or PostgreSQL."""
    shared = tmp_path / "shared"
    (shared / "data").mkdir(parents=True)
    data = shared / "data" / "data.txt"
    data.write_text("1 2 3 4 5 6 7 8\n")
    if request.param == "sqlite":
        url, cleanup = f"sqlite:///{shared / 'store.sqlite'}", lambda: None
    else:
        url, cleanup = store_url_for("postgresql", tmp_path)
    yield url, shared / "artifacts", data
    cleanup()


@pytest.mark.slow
def test_two_homes_reuse_and_verify_each_other(team, tmp_path):
    url, shared, data = team
    ana = Home(tmp_path / "ana" / "proj", url, shared, data)
    ben = Home(tmp_path / "ben" / "proj", url, shared, data)
    first, _ = ana.submit()
    sealed = ana.bundle(first)
    locations = {a["location"] for a in sealed["predicate"]["artifacts"]}
    # the store names artifacts by key, never by ana's folder
    assert not any(str(ana.root) in loc for loc in locations), locations
    assert any(loc.startswith("blake3/") for loc in locations)

    # ana's folder is gone before ben relies on anything she made
    shutil.move(tmp_path / "ana", tmp_path / "ana-gone")
    second, progress = ben.submit()
    assert statuses(progress) == {"reused"}, progress
    assert ben.verify(first).returncode == 0, ben.verify(first).stdout
    assert ben.verify(second).returncode == 0
    # ben's own root now holds the fetched copies, and the bundle ben sees is ana's
    assert (ben.own / "blake3").is_dir()
    seen = ben.bundle(first)  # the same artifacts, by key, and the same model files
    assert (seen["predicate"]["artifacts"], seen["subject"]) == (
        sealed["predicate"]["artifacts"], sealed["subject"])

    # ana comes back (her folder renamed): her steps resolve in her own root, and she
    # verifies ben's candidate
    shutil.move(tmp_path / "ana-gone", tmp_path / "ana")
    moved = tmp_path / "ana" / "proj-renamed"
    shutil.move(ana.root, moved)
    ana.root = moved
    _third, progress = ana.submit()
    assert statuses(progress) == {"reused"}
    assert ana.verify(second).returncode == 0


@pytest.mark.slow
def test_a_home_without_the_shared_root_re_runs_and_never_fails(team, tmp_path):
    url, shared, data = team
    ana = Home(tmp_path / "ana", url, shared, data)
    ana.submit()
    solo = Home(tmp_path / "solo", url, None, data)
    candidate, progress = solo.submit()
    # its own root lacks ana's outputs and it has no shared root: the steps run again
    assert statuses(progress) == {"executed"}, progress
    assert solo.verify(candidate).returncode == 0


@pytest.mark.slow
def test_reuse_never_points_at_an_artifact_no_root_has(team, tmp_path):
    url, shared, data = team
    ana = Home(tmp_path / "ana", url, shared, data)
    ana.submit()
    shutil.rmtree(ana.own)
    shutil.rmtree(shared)
    candidate, progress = ana.submit()
    assert statuses(progress) == {"executed"}, progress
    assert ana.verify(candidate).returncode == 0


@pytest.mark.slow
def test_a_damaged_shared_copy_is_never_used(team, tmp_path):
    url, shared, data = team
    ana = Home(tmp_path / "ana", url, shared, data)
    ana.submit()
    for weights in shared.rglob("weights.txt"):
        weights.chmod(0o644)
        weights.write_text("999")
    ben = Home(tmp_path / "ben", url, shared, data)
    _candidate, progress = ben.submit()
    assert "executed" in statuses(progress)  # fit's model could not be fetched intact
    assert not any(p.read_text() == "999" for p in ben.own.rglob("weights.txt"))


@pytest.mark.slow
def test_a_renamed_project_folder_keeps_working(tmp_path):
    # the default: a SQLite store and the artifact root both inside the project folder
    proj = tmp_path / "proj"
    home = Home(proj, "", None, tmp_path / "data.txt")
    (tmp_path / "data.txt").write_text("1 2 3 4 5 6 7 8\n")
    home.store_url = f"sqlite:///{proj / 'evidence' / 'store.sqlite'}"
    first, _ = home.submit()
    renamed = tmp_path / "renamed"
    shutil.move(proj, renamed)
    home.root = renamed
    home.store_url = f"sqlite:///{renamed / 'evidence' / 'store.sqlite'}"
    second, progress = home.submit()
    assert statuses(progress) == {"reused"}, progress
    for candidate in (first, second):
        done = home.verify(candidate)
        assert done.returncode == 0, done.stdout


@pytest.mark.slow
def test_a_store_from_before_keys_is_migrated_and_reused_from_another_folder(tmp_path):
    import sqlalchemy as sa

    data = tmp_path / "data.txt"
    data.write_text("1 2 3 4 5 6 7 8\n")
    url = f"sqlite:///{tmp_path / 'store.sqlite'}"
    home = Home(tmp_path / "proj", url, None, data)
    _first, _ = home.submit()
    engine = sa.create_engine(url)
    with engine.begin() as conn:  # absolute locations in someone's root, as before keys
        conn.execute(sa.text("UPDATE artifacts SET location = :root || '/' || key "
                             "WHERE key IS NOT NULL"), {"root": "/home/someone/old/artifacts"})
    _downgrade(engine, "0005_i16")  # the revision before keys: no key column
    with engine.connect() as conn:
        assert "key" not in {c["name"] for c in sa.inspect(conn).get_columns("artifacts")}
    second, progress = home.submit()
    assert statuses(progress) == {"reused"}, progress
    with engine.begin() as conn:
        rows = conn.execute(sa.text("SELECT location, key FROM artifacts")).all()
    engine.dispose()
    keyed = [(loc, key) for loc, key in rows if loc.startswith("/home/someone/")]
    assert keyed and all(loc == f"/home/someone/old/artifacts/{key}" for loc, key in keyed)
    assert all(key is None for loc, key in rows if loc == str(data))  # an input: no key
    assert home.verify(second).returncode == 0


def _downgrade(engine, revision: str) -> None:
    from alembic import command
    from alembic.config import Config

    from mlpipe.evidence.storage.migrate import MIGRATIONS

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, revision)


@pytest.mark.slow
def test_inputs_read_in_each_homes_own_folder_are_verified_by_any_home(team, tmp_path):
    """Each home reads the data from its own folder (the same bytes); once the first home's
    folder is gone, the second verifies the first home's candidate: the input snapshot was
    published to the shared root by content, and is found there by its digest."""
    url, shared, data = team
    homes = []
    for who in ("ana", "ben"):
        own = tmp_path / who / "data.txt"
        own.parent.mkdir(parents=True)
        own.write_bytes(data.read_bytes())
        homes.append(Home(tmp_path / who / "proj", url, shared, own))
    ana, ben = homes
    first, _ = ana.submit()
    inputs = {a["digest"] for a in ana.bundle(first)["predicate"]["artifacts"]
              if a["location"] == str(tmp_path / "ana" / "data.txt")}
    assert len(inputs) == 1, ana.bundle(first)["predicate"]["artifacts"]
    published = [p for p in shared.rglob("input") if p.is_file()]
    assert [p.read_bytes() for p in published] == [data.read_bytes()]
    shutil.move(tmp_path / "ana", tmp_path / "ana-gone")
    second, progress = ben.submit()
    assert statuses(progress) == {"reused"}, progress
    done = ben.verify(first)
    assert done.returncode == 0, done.stdout + done.stderr
    assert ben.verify(second).returncode == 0
    assert len([p for p in shared.rglob("input") if p.is_file()]) == 1  # deduplicated
