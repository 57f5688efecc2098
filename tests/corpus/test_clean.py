"""The precision corpus (tests/corpus/clean/): correct pipelines, by the guides, get no warning
and no finding. Every committed pipeline is checked; a representative one of each kind this
machine can run is also run here (slow) and its evidence read; generated pipelines drawn at
random from the same axes get no warning (hypothesis)."""
from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from mlpipe.checks import check_pipeline
from mlpipe.loader import load_spec

CLEAN = Path(__file__).parent / "clean"
sys.path.insert(0, str(CLEAN))
import generate  # noqa: E402  (the corpus's generator, beside its pipelines)

ROOT = Path(__file__).resolve().parents[2]
TARGETS = {v.name: f"{CLEAN / 'pipelines' / v.name}.py:{v.name}" for v in generate.VARIANTS}
#: Azure ML pipeline jobs (CLI v2 YAML) written by hand: checked, not run (their scripts need
#: GPUs, torch with NCCL, TensorFlow or Horovod).
TARGETS.update({f"yaml/{p.parent.name}": str(p)
                for p in sorted((CLEAN / "yaml").glob("*/pipeline.yml"))})
#: The project's own example (images: a reviewed manifest, a {split} folder layout shared by
#: training and evaluation, GPU DDP training and CPU evaluation): correct by the same guides.
#: (Not the azure-ai-ml Python example, `defect_classifier_aml.py`: it states no split contracts,
#: so its MP416/MP417 warnings are true; docs/tutorial.md shows them and its tests pin them.)
TARGETS.update({f"example/{p.stem}": str(p) for p in sorted((ROOT / "pipelines").glob("d*.py"))
                if not p.stem.endswith("_aml")})


def _findings(target: str) -> list[str]:
    spec, found = load_spec(target)
    _, more = check_pipeline(spec)
    return [f"{d.severity.value}[{d.code}] {d.message}" for d in [*found, *more]]


def test_the_corpus_is_large_and_varied_and_what_its_generator_writes(tmp_path):
    assert len(generate.VARIANTS) >= 40 and len(TARGETS) - len(generate.VARIANTS) >= 6
    kinds = {(v.framework, v.split) for v in generate.VARIANTS}
    assert {f for f, _ in kinds} == set(generate.FRAMEWORKS)
    assert {s for _, s in kinds} == set(generate.SPLITS)
    assert any(v.nested for v in generate.VARIANTS) and any(v.instances > 1
                                                            for v in generate.VARIANTS)
    generate.write(tmp_path, generate.VARIANTS)
    for v in generate.VARIANTS:   # regenerate with: python tests/corpus/clean/generate.py
        assert (CLEAN / "pipelines" / f"{v.name}.py").read_text() == \
            (tmp_path / f"{v.name}.py").read_text(), v.name
    for name in generate.ENVS:
        assert (CLEAN / "pipelines" / "envs" / name).read_text() == generate.ENVS[name]


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_a_correct_pipeline_gets_no_diagnostic(name):
    assert _findings(TARGETS[name]) == []


@pytest.mark.parametrize("name", ["cpu_column_folder_conda", "ddp_2x4_manifest_kind",
                                  "yaml/ddp_manifest", "yaml/nested_ddp",
                                  "tf_2worker_conda", "mpi_2x4_conda_nested",
                                  "cpu_layout_copied_nested"])
def test_check_fail_on_warning_passes(name):
    done = subprocess.run([sys.executable, "-m", "mlpipe.cli", "check", TARGETS[name],
                           "--fail-on", "warning"], capture_output=True, text=True, timeout=120,
                          cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip().endswith("No problems found."), done.stdout


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(generate.variants())
def test_a_generated_correct_pipeline_gets_no_warning(tmp_path, variant):
    [path] = generate.write(tmp_path, [variant])
    found = [f for f in _findings(f"{path}:{variant.name}") if not f.startswith("info")]
    assert found == [], generate.summary(variant)


# --- a local run of one pipeline of each kind this machine can run ---------------------------

ROWS = [{"id": f"r{i}", "x": f"{i / 10:.1f}", "y": str(int(i >= 6))} for i in range(12)]
TEST_IDS = {"r2", "r5", "r7", "r10"}


def _data(root: Path, split: str) -> list[str]:
    def table(path, rows, extra=()):
        with path.open("w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=["id", "x", "y", *extra])
            w.writeheader()
            w.writerows(rows)
    part = {r["id"]: "test" if r["id"] in TEST_IDS else "train" for r in ROWS}
    if split == "manifest":
        table(root / "rows.csv", ROWS)
        with (root / "split.csv").open("w") as fh:
            fh.write("id,split\n" + "".join(f"{i},{s}\n" for i, s in part.items()))
        return ["--input", "rows=rows.csv", "--input", "split=split.csv"]
    if split == "layout":
        for name in ("train", "test"):
            (root / "rows" / name).mkdir(parents=True)
            table(root / "rows" / name / "rows.csv", [r for r in ROWS if part[r["id"]] == name])
        return ["--input", "rows=rows"]
    table(root / "rows.csv", [{**r, "split": part[r["id"]]} for r in ROWS], extra=["split"])
    return ["--input", "rows=rows.csv"]


#: One of each kind this machine runs (TensorFlow and Horovod are not installed here: their
#: pipelines are checked above, not run).
RUNS = ["cpu_manifest_mlflow", "cpu_layout_folder", "cpu_column_mlflow_conda",
        "cpu_layout_copied_nested", "ddp_2x4_manifest_kind"]


@pytest.mark.slow
@pytest.mark.parametrize("name", RUNS)
def test_a_local_run_has_no_warning_and_its_evidence_no_finding(tmp_path, name):
    variant = next(v for v in generate.VARIANTS if v.name == name)
    if variant.framework == "pytorch":
        pytest.importorskip("torch")
    project = tmp_path / "proj"
    project.mkdir()
    generate.write(project, [variant])
    (project / "mlpipe.toml").write_text("")
    inputs = _data(project, variant.split)
    env = {k: v for k, v in os.environ.items() if k not in ("MLPIPE_HOME", "MLPIPE_STORE_URL")}

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "mlpipe.cli", *args], cwd=project,
                              env=env, capture_output=True, text=True, timeout=300)
    scale = ["--local-scale", "train=1x2"] if variant.distributed else []
    done = cli("submit", f"{name}.py:{name}", *inputs, *scale)
    assert done.returncode == 0, done.stdout + done.stderr
    assert not re.search(r"(warning|error)\[MP\d{3}\]", done.stdout + done.stderr), done.stdout
    candidate = re.search(r"^candidate (c-[0-9a-f]+)$", done.stdout, re.M).group(1)
    shown = cli("evidence", candidate, "--format", "json")
    assert shown.returncode == 0, shown.stderr
    bundle = json.loads(shown.stdout)["predicate"]
    assert bundle["findings"] == []
    assert bundle["checks"]["errors"] == 0
