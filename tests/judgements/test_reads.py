"""Reads outside the declared inputs, judged from a step record (MP804), the content the
finisher records for them, and the reuse rule that follows from it."""
from mlpipe.backends.local.reuse import changed_hidden_input
from mlpipe.judgements.reads import check_reads
from mlpipe.runtime.finish import hidden_inputs


def test_the_finisher_records_each_file_once_with_its_ranks_and_content(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "lookup.csv").write_text("a,b\n")
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "w.bin").write_bytes(b"\0" * 10)
    parts = [{"rank": 0, "reads_outside_inputs": [str(tmp_path / "lookup.csv")]},
             {"rank": 1, "reads_outside_inputs": [str(tmp_path / "lookup.csv"),
                                                  str(tmp_path / "models" / "w.bin"),
                                                  str(tmp_path / "gone.txt")]}]
    found = hidden_inputs(parts, reads=["models"])
    assert [(e["path"].rsplit("/", 1)[1], e["ranks"], e["declared"], e["exists"], e["size"])
            for e in found] == [("gone.txt", [1], False, False, None),
                                ("lookup.csv", [0, 1], False, True, 4),
                                ("w.bin", [1], True, True, 10)]
    assert found[0]["digest"] is None and found[1]["digest"].startswith("blake3:")
    assert hidden_inputs([{"rank": 0, "reads_outside_inputs": None}]) is None
    assert hidden_inputs([{"rank": 0, "reads_outside_inputs": []}]) == []


def test_mp804_names_the_undeclared_files_and_counts_the_rest():
    entries = [{"path": f"/data/f{i}.csv", "declared": False} for i in range(5)]
    entries.append({"path": "/models/w.bin", "declared": True})
    [finding] = check_reads({"step": {"hidden_inputs": entries}}, step="prep")
    assert (finding.code, finding.step) == ("MP804", "prep")
    assert finding.message.startswith(
        "step 'prep' read 5 files outside its declared inputs ('/data/f0.csv', '/data/f1.csv', "
        "'/data/f2.csv' and 2 more); the cache key cannot see them change")
    assert check_reads({"step": {"hidden_inputs": entries[5:]}}) == []
    assert check_reads({"step": {"hidden_inputs": None}}) == []
    assert check_reads(None) == []


def test_reuse_waits_for_the_same_content(tmp_path):
    path = tmp_path / "lookup.csv"
    path.write_text("1")
    [entry] = hidden_inputs([{"rank": 0, "reads_outside_inputs": [str(path)]}])
    assert changed_hidden_input([entry]) is None
    path.write_text("2")
    assert changed_hidden_input([entry]) == (f"read '{path}' outside its inputs, and its "
                                             f"content has changed since")
    assert changed_hidden_input([{**entry, "declared": True}]) is None
    path.unlink()
    assert changed_hidden_input([entry]).endswith("and it is gone now")
    assert "was not recorded" in changed_hidden_input([{**entry, "digest": None}])
