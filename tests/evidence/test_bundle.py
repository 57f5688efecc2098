"""The evidence bundle end to end: real submits, a real store, the CLI as users run it."""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bundle_project import BundleProject, mask, mask_bundle
from golden_files import assert_golden

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    proj = BundleProject(tmp_path_factory.mktemp("bundle") / "proj")
    proj.candidate = proj.submit()
    return proj


def _schema_validator():
    import jsonschema

    schema = json.loads((Path(__file__).parents[2] / "evidence" / "bundle.schema.json")
                        .read_text())
    return jsonschema.Draft202012Validator(schema)


def test_text_bundle_matches_its_golden(project):
    done = project.evidence(project.candidate)
    assert done.returncode == 0, done.stderr
    assert_golden("evidence/review.text", mask(done.stdout, project.root))


def test_json_bundle_is_an_in_toto_statement_matching_its_golden_and_schema(project):
    done = project.evidence(project.candidate, "--format", "json")
    bundle = json.loads(done.stdout)
    _schema_validator().validate(bundle)
    assert bundle["_type"] == "https://in-toto.io/Statement/v1"
    assert [s["name"] for s in bundle["subject"]] == ["model/MLmodel", "model/weights.txt"]
    weights = project.root / "evidence" / "artifacts"
    found = next(weights.rglob("weights.txt"))
    assert bundle["subject"][1]["digest"]["sha256"] == hashlib.sha256(
        found.read_bytes()).hexdigest()
    text = json.dumps(mask_bundle(bundle), indent=2, sort_keys=True)
    assert_golden("evidence/review.json", mask(text, project.root))


def test_the_printed_json_is_the_sealed_bytes_and_hashes_to_the_digest(project):
    raw = project.evidence(project.candidate, "--format", "json").stdout.encode()
    text = project.evidence(project.candidate).stdout
    assert f"digest sha256:{hashlib.sha256(raw).hexdigest()}" in text
    again = project.evidence(project.candidate, "--format", "json").stdout.encode()
    assert again == raw  # nothing changed: the same sealed bundle, not a new one


def test_schema_file_is_the_packaged_one_and_committed():
    # the repository's evidence/bundle.schema.json is a link to the packaged schema: a new
    # field is written into one file, never into a copy that can fall behind
    root = Path(__file__).parents[2]
    published = root / "evidence" / "bundle.schema.json"
    assert published.is_symlink()
    assert published.resolve() == (root / "mlpipe" / "evidence" / "bundles" /
                                   "bundle.schema.json").resolve()
    import subprocess
    listed = subprocess.run(["git", "-C", str(root), "check-ignore", "-q",
                             "evidence/bundle.schema.json"])
    assert listed.returncode == 1, "evidence/bundle.schema.json is git-ignored"


def test_prefix_unknown_and_ambiguous_ids(project):
    assert project.evidence(project.candidate[:5]).returncode == 0
    unknown = project.evidence("c-nothere")
    assert unknown.returncode == 2
    assert unknown.stderr == ("error: no candidate 'c-nothere' in the evidence store (list them "
                              "with `mlpipe candidates`)\n")
    listed = project.cli("candidates")
    assert project.candidate in listed.stdout and "review" in listed.stdout


def test_markdown_names_every_section(project):
    md = project.evidence(project.candidate, "--format", "markdown").stdout
    for heading in ("# Evidence for candidate", "## Findings", "## Evaluation", "## Provenance",
                    "## Steps", "## Compile-time checks", "## Bundle"):
        assert heading in md


def test_a_run_that_reuses_training_says_so_and_a_full_rerun_is_no_new_candidate(tmp_path):
    proj = BundleProject(tmp_path / "proj")
    first = proj.submit()
    assert proj.submit() == first   # the same model and evaluation bytes: the same candidate
    again = proj.submit("review", "--param", "split=validation")
    assert again != first
    bundle = proj.bundle(again)
    steps = {s["step"]: s for s in bundle["predicate"]["steps"]}
    assert (steps["fit"]["status"], steps["score"]["status"]) == ("reused", "executed")
    assert steps["fit"]["reused_from"]["executed_step_run"]
    assert bundle["predicate"]["findings"] == []
    text = proj.evidence(again).stdout
    assert "fit: fit@1.0.0  REUSED from run r-" in text
    assert "not re-executed for this candidate" in text
    assert "1 of 2 steps was reused from run r-" in text


@pytest.mark.parametrize("pipeline, extra, code, message", [
    ("unevaluated", (), "MP701", r"has no evaluation: its pipeline's Candidate names no "
                                 r"evaluation output"),
    ("review", ("--param", "split=train"), "MP702",
     r"ran on population 'train', which overlaps 'train', the population step 'fit' trained on"),
    ("ranks", (), "MP703", r"metric 'train_loss' of step 'fit_ranks' is labelled global but "
                           r"was logged by rank 0 of a world of 2 without aggregation"),
    ("same_data", (), "MP702",
     r"^the evaluation in step 'score_all' read input 'data' with the same content as 'fit''s "
     r"training input 'data' \(blake3:[0-9a-f]{64}\) and opened the same 1 file\(s\) of it "
     r"that training opened: it evaluates on the training examples, whatever its population "
     r"is called$"),
    ("by_ids", ("--param", "start=4"), "MP702",
     r"^the evaluation in step 'score_ids' consumed 2 of its 4 examples that step 'fit_ids' "
     r"trained on \('ex4', 'ex5'\), whatever its population is called$"),
])
def test_each_finding_is_at_the_top(tmp_path, pipeline, extra, code, message):
    import re
    proj = BundleProject(tmp_path / "proj")
    cand = proj.submit(pipeline, *extra)
    findings = proj.bundle(cand)["predicate"]["findings"]
    assert [f["code"] for f in findings] == [code]
    assert re.search(message, findings[0]["message"])
    shown = proj.evidence(cand)
    assert shown.stdout.split("\n\n")[1].startswith(f"FINDINGS\n  ERROR [{code}")
    # the findings gate: the bundle is shown in full, and the command fails
    assert shown.returncode == 1
    assert shown.stderr == (f"error: candidate {cand} has 1 error-severity finding ({code}): "
                            f"it is not ready for review\n")
    for fmt in ("markdown", "html"):
        assert proj.evidence(cand, "--format", fmt).returncode == 1
    # --verify judges integrity only: nothing in the store differs from the sealed bundle
    assert proj.evidence(cand, "--verify").returncode == 0


def test_one_folder_whose_parts_the_steps_open_is_judged_by_the_files_they_opened(tmp_path):
    proj = BundleProject(tmp_path / "proj")
    # both are given the whole folder; training opens train.txt, the evaluation test.txt
    clean = proj.bundle(proj.submit("parts", data="tree"))
    assert clean["predicate"]["findings"] == []
    both = proj.bundle(proj.submit("parts", "--param", "file=train.txt", data="tree"))
    findings = both["predicate"]["findings"]
    assert [(f["code"], f["step"]) for f in findings] == [("MP702", "score_part")]
    assert re.search(r"and opened the same 1 file\(s\) of it that training opened: it "
                     r"evaluates on the training examples", findings[0]["message"])


def test_an_unobserved_step_on_the_training_data_is_an_inference_not_an_error(tmp_path):
    proj = BundleProject(tmp_path / "proj")
    done = proj.cli("submit", "review.py:same_data", "--input", "data=data.txt",
                    env={"MLPIPE_OBSERVE": "0"})
    assert done.returncode == 0, done.stderr
    cand = re.search(r"^candidate (c-[0-9a-f]+)$", done.stdout, re.M).group(1)
    findings = proj.bundle(cand)["predicate"]["findings"]
    assert [(f["code"], f["severity"]) for f in findings] == [("MP417", "warning")]
    assert re.search(r"read input 'data' with the same content as 'fit''s training input "
                     r"'data' \(blake3:[0-9a-f]{64}\), and neither step was given a split "
                     r"manifest or a split to pick different rows; which files of it each "
                     r"opened was not observed, so whether it evaluates on the training "
                     r"examples cannot be told$", findings[0]["message"])


def test_disjoint_ids_are_clean_and_silence_about_the_population_is_a_warning(tmp_path):
    proj = BundleProject(tmp_path / "proj")
    assert proj.bundle(proj.submit("by_ids"))["predicate"]["findings"] == []
    findings = proj.bundle(proj.submit("quiet"))["predicate"]["findings"]
    assert [(f["code"], f["severity"], f["step"]) for f in findings] == [
        ("MP417", "warning", "score")]
    assert findings[0]["message"] == (
        "whether the evaluation in step 'score' overlaps what step 'fit_quiet' trained on "
        "cannot be told: training logged no metric naming its population, and the two steps "
        "did not both record the example ids they consumed")


def test_reuse_with_no_executed_run_behind_it_is_a_finding(tmp_path):
    proj = BundleProject(tmp_path / "proj")
    first = proj.submit()
    second = proj.submit("review", "--param", "split=validation")   # fit reused
    origin = proj.bundle(second)["predicate"]["steps"][0]["reused_from"]["step_run"]
    # as if the store had been pruned, or synced without the run that executed the step
    proj.sql(f"UPDATE step_runs SET status = 'failed' WHERE id = '{origin}'")
    findings = proj.bundle(second, "--rebuild")["predicate"]["findings"]
    assert findings[0]["code"] == "MP704"
    assert findings[0]["message"].startswith(f"training step 'fit' was reused from step run "
                                             f"{origin}, but no executed run of it is in this "
                                             f"store")
    assert first


def test_check_warnings_of_the_run_are_in_the_bundle(tmp_path):
    proj = BundleProject(tmp_path / "proj")
    cand = proj.submit("ranks")
    checks = proj.bundle(cand)["predicate"]["checks"]
    assert checks["recorded"] and (checks["errors"], checks["error_results"]) == (0, [])
    coordination = proj.bundle(cand)["predicate"]["coordination"]
    assert coordination[0]["step"] == "fit_ranks" and coordination[0]["world_size"] == 2


def test_the_error_count_is_counted_from_the_stored_check_results(tmp_path):
    # mlpipe never starts a run with check errors; a store that holds one anyway (written by
    # another tool, or edited) must say so in the bundle, not print a constant 0
    proj = BundleProject(tmp_path / "proj")
    cand = proj.submit()
    run = proj.bundle(cand)["predicate"]["run"]["id"]
    for code, name in (("MP301", "artifact-kind-mismatch"), ("MP202", "param-out-of-range")):
        proj.sql(f"INSERT INTO check_results (run_id, code, name, severity, message) VALUES "
                 f"('{run}', '{code}', '{name}', 'error', 'recorded by hand')")
    checks = proj.bundle(cand, "--rebuild")["predicate"]["checks"]
    assert checks["errors"] == 2
    assert [(d["code"], d["severity"]) for d in checks["error_results"]] == [
        ("MP301", "error"), ("MP202", "error")]
    text = proj.evidence(cand).stdout
    assert "2 ERROR(S) recorded with this run: it ran with check errors" in text
    assert "error[MP301] artifact-kind-mismatch: recorded by hand" in text
    assert "0 errors" not in text


def test_a_later_bundle_records_the_previous_digest(tmp_path):
    proj = BundleProject(tmp_path / "proj")
    cand = proj.submit()
    first = proj.evidence(cand, "--format", "json").stdout.encode()
    first_digest = "sha256:" + hashlib.sha256(first).hexdigest()
    proj.sql("UPDATE candidates SET name = 'renamed'")
    changed = proj.evidence(cand, "--format", "json", "--rebuild")
    second = json.loads(changed.stdout)
    assert second["predicate"]["previous_bundle"] == first_digest
    assert "candidate.name: 'review' -> 'renamed'" in changed.stderr
    assert proj.evidence(cand, "--verify").returncode == 0


# --- verification ----------------------------------------------------------------------------

@pytest.fixture
def sealed(tmp_path):
    proj = BundleProject(tmp_path / "proj")
    proj.candidate = proj.submit()
    proj.sealed = proj.bundle(proj.candidate)
    return proj


def _artifact(proj, port):
    p = proj.sealed["predicate"]
    digest = next(o["digest"] for st in p["steps"] for o in st["outputs"] if o["port"] == port)
    key = next(a["location"] for a in p["artifacts"] if a["digest"] == digest)
    return proj.root / "evidence" / "artifacts" / key  # a key in the project's artifact root


def test_verify_passes_on_an_untouched_store(sealed):
    done = sealed.evidence(sealed.candidate, "--verify")
    assert done.returncode == 0, done.stdout
    assert done.stdout.startswith("verified bundle sha256:")
    assert "nothing changed" in done.stdout
    # everything a local run names is here: re-hashed, nothing listed as not (MP661)
    assert "NOT re-hashed" not in done.stdout
    as_json = json.loads(sealed.evidence(sealed.candidate, "--verify", "--format", "json").stdout)
    assert (as_json["ok"], as_json["complete"], as_json["not_rehashed"]) == (True, True, [])
    assert {(a["remote"], a["digest_by"]) for a in sealed.sealed["predicate"]["artifacts"]} == {
        (False, "mlpipe")}


def test_verify_finds_a_changed_model_byte(sealed):
    weights = _artifact(sealed, "model") / "weights.txt"
    os.chmod(weights, 0o644)
    weights.write_text(weights.read_text() + "0")
    done = sealed.evidence(sealed.candidate, "--verify")
    assert done.returncode == 1
    assert "error[MP711] artifact-changed: model file model/weights.txt changed" in done.stdout
    assert "error[MP711] artifact-changed: artifact fit.model at " in done.stdout


def test_verify_finds_an_edited_metric_row(sealed):
    sealed.sql("UPDATE metrics SET value = 0.99 WHERE name = 'accuracy'")
    done = sealed.evidence(sealed.candidate, "--verify")
    assert done.returncode == 1
    assert ("error[MP713] evidence-changed-in-store: the store no longer matches the sealed "
            "bundle: predicate.evaluation.metrics[accuracy].value: 0.875 -> 0.99") in done.stdout


def test_verify_finds_a_changed_snapshot_file(sealed):
    (sealed.root / "data.txt").write_text("1 2 3 4 5 6 7 9\n")
    done = sealed.evidence(sealed.candidate, "--verify")
    assert done.returncode == 1
    assert "error[MP711] artifact-changed: data snapshot 'data' at " in done.stdout


def test_verify_reports_a_deleted_report_without_crashing(sealed):
    report = _artifact(sealed, "report")
    shutil.rmtree(report.parent)
    done = sealed.evidence(sealed.candidate, "--verify")
    assert done.returncode == 1
    key = report.relative_to(sealed.root / "evidence" / "artifacts")
    assert f"error[MP712] artifact-missing: artifact score.report is missing: nothing at " \
           f"{key} in the artifact root {sealed.root / 'evidence' / 'artifacts'}" in done.stdout
    assert "Traceback" not in done.stderr


def test_verify_finds_edited_sealed_bytes(sealed):
    sealed.sql("UPDATE bundles SET content = CAST(REPLACE(CAST(content AS TEXT), '0.875', "
               "'0.975') AS BLOB)")
    done = sealed.evidence(sealed.candidate, "--verify")
    assert done.returncode == 1
    assert "error[MP714] bundle-bytes-changed: sealed bundle sha256:" in done.stdout


@pytest.mark.parametrize("content", ["{}", "[]", '{"predicate": {}}', "not json"])
def test_sealed_bytes_replaced_by_something_else_are_reported_not_crashed_on(sealed, content):
    # Found in review: these used to end in a KeyError/AttributeError traceback.
    sealed.sql(f"UPDATE bundles SET content = CAST('{content}' AS BLOB)")
    done = sealed.evidence(sealed.candidate, "--verify")
    assert done.returncode == 1
    assert "error[MP714] bundle-bytes-changed: sealed bundle sha256:" in done.stdout
    assert "it was altered in the store" in done.stdout
    assert "Traceback" not in done.stderr
    shown = sealed.evidence(sealed.candidate)
    assert shown.returncode == 1
    assert "it was altered in the store" in shown.stderr and "Traceback" not in shown.stderr
    rebuilt = sealed.evidence(sealed.candidate, "--rebuild")
    assert rebuilt.returncode != 0 and "Traceback" not in rebuilt.stderr
    assert "it was altered in the store" in rebuilt.stderr


READ_PROBE = """
import json, sys
from mlpipe.cli import main
sys.argv = ["mlpipe", *sys.argv[1:]]
try:
    main()
except SystemExit as exit:
    assert not exit.code, exit.code
heavy = sorted({m.split(".")[0] for m in sys.modules} & {"sqlalchemy", "alembic", "jsonschema"}
               | {m for m in sys.modules if m.startswith(("mlpipe.evidence.storage.models",
                                                          "mlpipe.evidence.bundles.seal"))})
print(json.dumps(heavy), file=sys.stderr)
"""


def test_a_sealed_bundle_is_shown_without_the_orm_or_the_schema(sealed):
    # its integrity is its digest: schema validation belongs to sealing and --verify
    for fmt in ("text", "json", "markdown", "html"):
        env = {k: v for k, v in os.environ.items() if k not in ("MLPIPE_HOME",
                                                                 "MLPIPE_STORE_URL")}
        done = subprocess.run([sys.executable, "-c", READ_PROBE, "evidence", sealed.candidate,
                               "--format", fmt], cwd=sealed.root, env=env, capture_output=True,
                              text=True)
        assert done.returncode == 0, (fmt, done.stderr)
        assert json.loads(done.stderr.strip().splitlines()[-1]) == [], fmt


def test_sealed_bytes_altered_with_their_digest_recomputed_are_reported_not_crashed_on(sealed):
    # the digest matches (someone rewrote both), the bytes are no bundle: the schema says why
    content = b'{"predicate": {"candidate": 3}}'
    digest = "sha256:" + hashlib.sha256(content).hexdigest()
    sealed.sql(f"UPDATE bundles SET content = CAST('{content.decode()}' AS BLOB), "
               f"digest = '{digest}'")
    for fmt in ("text", "json", "markdown", "html"):
        shown = sealed.evidence(sealed.candidate, "--format", fmt)
        assert shown.returncode == 1 and shown.stdout == "", (fmt, shown.stdout)
        assert f"error: sealed bundle {digest} no longer matches the bundle schema" \
            in shown.stderr, fmt
        assert "it was altered in the store" in shown.stderr and "Traceback" not in shown.stderr
    assert sealed.evidence(sealed.candidate, "--verify").returncode == 1


def test_sealed_bytes_altered_are_refused_by_their_digest_in_every_format(sealed):
    sealed.sql("UPDATE bundles SET content = CAST(REPLACE(CAST(content AS TEXT), '0.875', "
               "'0.975') AS BLOB)")
    for fmt in ("text", "json", "markdown", "html"):
        shown = sealed.evidence(sealed.candidate, "--format", fmt)
        assert shown.returncode == 1 and shown.stdout == "", fmt
        assert shown.stderr.startswith("error: sealed bundle sha256:"), fmt
        assert "no longer matches its digest: it was altered in the store" in shown.stderr


def test_the_fast_reader_knows_the_schema_head():
    from mlpipe.evidence.records.fastpath import SCHEMA_HEAD
    from mlpipe.evidence.storage.migrate import HEAD
    assert SCHEMA_HEAD == HEAD


def test_a_sealed_bundle_is_shown_as_sealed_until_rebuilt(sealed):
    sealed.sql("UPDATE metrics SET value = 0.5 WHERE name = 'accuracy'")
    assert sealed.bundle(sealed.candidate) == sealed.sealed
    rebuilt = sealed.evidence(sealed.candidate, "--rebuild")
    assert "warning: the store no longer matches bundle sha256:" in rebuilt.stderr
    assert "accuracy = 0.5" in rebuilt.stdout


def test_local_scale_launches_smaller_and_records_both(tmp_path):
    proj = BundleProject(tmp_path / "proj")
    cand = proj.submit("ranks", "--local-scale", "fit_ranks=2x1")
    step = proj.bundle(cand)["predicate"]["steps"][0]
    assert step["topology"]["declared"]["world_size"] == 2
    assert step["topology"]["local_scale"]["world_size"] == 2
    assert step["topology"]["ran"]["instances"] == 2
    assert step["topology"]["ran"]["processes_per_node"] == 1
    text = proj.evidence(cand).stdout
    assert ("topology declared pytorch x2 (1 node(s)); scaled down here to x2 (--local-scale); "
            "ran 2 node(s) x 1 process(es) = world 2") in text


@pytest.mark.parametrize("scale, message", [
    ("nope=2x2", r"--local-scale names step 'nope', which the pipeline does not have"),
    ("fit=2x2", r"--local-scale names step 'fit', which is not distributed"),
    ("fit_ranks=two", r"--local-scale fit_ranks=two is not NODESxPROCESSES"),
    ("fit_ranks=0x1", r"--local-scale fit_ranks=0x1 is not a positive size"),
])
def test_bad_local_scales_are_one_clear_message(tmp_path, scale, message):
    import re
    proj = BundleProject(tmp_path / "proj")
    pipeline = "review" if scale.startswith("fit=") else "ranks"
    done = proj.cli("submit", f"review.py:{pipeline}", "--input", "data=data.txt",
                    "--local-scale", scale)
    assert done.returncode == 2
    assert re.search(message, done.stderr), done.stderr


def test_seal_show_and_verify_on_each_store_backend(tmp_path, store_url):
    proj = BundleProject(tmp_path / "proj", store_url)
    cand = proj.submit()
    first = proj.evidence(cand, "--format", "json")
    assert first.returncode == 0, first.stderr
    digest = "sha256:" + hashlib.sha256(first.stdout.encode()).hexdigest()
    assert f"digest {digest}" in proj.evidence(cand).stdout
    assert proj.evidence(cand, "--verify").returncode == 0
    proj.sql("UPDATE metrics SET value = 0.5 WHERE name = 'accuracy'")
    tampered = proj.evidence(cand, "--verify")
    assert tampered.returncode == 1
    assert "predicate.evaluation.metrics[accuracy].value: 0.875 -> 0.5" in tampered.stdout


@pytest.mark.parametrize(("pipeline", "layout", "codes"), [
    # copies the snapshot's own train/ and test/ folders
    ("snapshot_parts", {"train/part.txt": "1 2 3 4 5 6", "test/part.txt": "7 8"}, []),
    # reads one file of the snapshot and deals its values out in the run
    ("snapshot_dealt", {"all.txt": "1 2 3 4 5 6 7 8"}, ["MP417"]),
])
def test_a_preparation_copying_the_snapshots_own_parts_is_no_unchecked_overlap(
        tmp_path, pipeline, layout, codes):
    # (one that re-deals the values of train/ and test/ opens the same files: the run cannot
    # tell it from a copy, MP414 reads it in the source; tests/checks/test_evaluation.py)
    proj = BundleProject(tmp_path / "proj")
    for name, values in layout.items():
        (proj.root / "parts" / name).parent.mkdir(parents=True, exist_ok=True)
        (proj.root / "parts" / name).write_text(values + "\n")
    findings = proj.bundle(proj.submit(pipeline, data="parts"))["predicate"]["findings"]
    assert [f["code"] for f in findings] == codes


TABLE_ROWS = "id,x,split\n" + "".join(
    f"r{i},{i},{'test' if i % 4 == 0 else 'train'}\n" for i in range(16))


@pytest.mark.parametrize(("keep", "codes"), [("true", []), ("false", ["MP702"])])
def test_an_evaluation_over_a_split_tables_training_rows_is_seen_without_the_bodys_help(
        tmp_path, keep, codes):
    # neither step calls record_consumed: the runtime counted the table's rows by its split
    # column, and the evaluation says how many examples it evaluated
    proj = BundleProject(tmp_path / "proj")
    (proj.root / "features.csv").write_text(TABLE_ROWS)
    cand = proj.submit("table", "--param", f"keep={keep}", data="features.csv")
    findings = proj.bundle(cand)["predicate"]["findings"]
    assert [f["code"] for f in findings] == codes
    if codes:
        assert findings[0]["message"] == (
            "the evaluation in step 'score_table' reports 16 examples of population 'test', "
            "but its input 'rows' holds 4 'test' rows (by its split column 'split': test 4, "
            "train 12): at least 12 of the rows it evaluated are training rows (it read the "
            "whole table)")
        assert findings[0]["severity"] == "error"
