"""Real CLI v2 pipelines written by others: the azure-ai-ml SDK team's own test configurations
(``../shared/corpus/azure-ai-ml-test-configs``, read in place, never copied into this
repository). Every pipeline azure-ai-ml loads must be read by mlpipe, check with no error and
no finding that is not true (each warning is pinned below with why it is true), and come back
from the export equal field by field (tests/backends/azure/fidelity.py). docs/azure.md states
the measured figure; ``test_the_docs_figure_is_measured`` keeps it true (``make golden``
rewrites it after an intended change)."""
from __future__ import annotations

import csv
import os
import pathlib
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

import pytest

from golden_files import updating

ROOT = pathlib.Path(__file__).resolve().parents[3]
DOC = ROOT / "docs" / "azure.md"
BEGIN, END = "<!-- corpus figure: begin -->", "<!-- corpus figure: end -->"


def _corpus() -> pathlib.Path | None:
    given = os.environ.get("MLPIPE_CORPUS")
    if given:
        return pathlib.Path(given)
    for folder in (ROOT, *ROOT.parents):  # ../shared from the checkout (or from a worktree)
        found = folder.parent / "shared" / "corpus" / "azure-ai-ml-test-configs"
        if (found / "MANIFEST.tsv").exists():
            return found
    return None


CORPUS = _corpus()
pytestmark = pytest.mark.skipif(
    CORPUS is None, reason="the third-party corpus is absent: ../shared/corpus/"
                           "azure-ai-ml-test-configs (or MLPIPE_CORPUS) holds it; it is never "
                           "copied into this repository")
ROWS = [] if CORPUS is None else list(csv.DictReader(
    (CORPUS / "MANIFEST.tsv").open(encoding="utf-8"), delimiter="\t"))
VALID = [r["path"] for r in ROWS if r["loads"] == "yes"]

#: The warnings mlpipe reports on the pipelines azure-ai-ml loads, each reviewed as true.
FINDINGS = {
    # MP112: the pipeline declares an input that no job reads
    "pipeline_jobs/helloworld_pipeline_job_defaults.yml": ["MP112"],
    "pipeline_jobs/helloworld_pipeline_job_no_paths.yml": ["MP112"],
    # MP802 too: its component is named by the label @default, which moves between versions
    "pipeline_jobs/helloworld_pipeline_job_with_default_component.yml": ["MP112", "MP802"],
    "pipeline_jobs/helloworld_pipeline_job_with_sweep_node.yml": ["MP112", "MP112"],
    "pipeline_jobs/helloworld_pipeline_job_with_sweep_node_register_output.yml":
        ["MP112", "MP112"],
    # MP802 too: an environment named by its label (azureml:NAME@latest) moves between runs
    "pipeline_jobs/hello_pipeline_job_with_registries.yml": ["MP112", "MP802"],
    "pipeline_jobs/hello-pipeline-abc.yml": ["MP802"],
    "pipeline_jobs/pipeline_job_init_finalize.yaml": ["MP802"],
    "pipeline_jobs/serverless_compute/all_types/command/pipeline.yml": ["MP802"],
    "pipeline_jobs/serverless_compute/pipeline_with_command.yml": ["MP802"],
    "pipeline_jobs/serverless_compute/pipeline_with_queue_settings.yml": ["MP802"],
    "command_job/command_job_registry.yml": ["MP802"],
    # MP802: data read from a URL or a datastore path, which can change behind the same text
    "command_job/command_job_input_types.yml": ["MP802"],  # azureml://fake/url.json
    "command_job/command_job_inputs_dataset_short_form_test.yml": ["MP802"],  # ...@latest
    "command_job/command_job_inputs_dataset_test.yml": ["MP802"],  # https://
    "command_job/command_job_inputs_incorrect_datastore_test.yml": ["MP802"],  # https://
    "command_job/command_job_test_with_dataset.yml": ["MP802"],  # a datastore path
    "command_job/inlined_assets.yaml": ["MP802", "MP803"],  # https://; an image by tag
    "sweep_job/sweep_job_input_types.yml": ["MP802"],  # azureml://fake/url.json
    "sweep_job/sweep_job_search_space_choice_string.yml": ["MP802"],  # https://
    "sweep_job/sweep_job_test_inputs.yaml": ["MP802"],  # wasbs://
    "pipeline_jobs/helloworld_pipeline_job_data_options.yml": ["MP802"] * 7,
    # MP806: a pipeline output bound to a fixed datastore path every run overwrites
    "pipeline_jobs/mixed_output_path_setting.yaml": ["MP802", "MP806"],
    "pipeline_jobs/node_output_path_setting.yaml": ["MP802"],
    "pipeline_jobs/helloworld_pipeline_job_with_component_output.yml": ["MP112", "MP802"],
    # MP803: an image with no tag or the tag latest, which is moved to newer builds
    "pipeline_jobs/helloworld_pipeline_job_environment_variable.yml": ["MP803", "MP803"],
    "pipeline_jobs/serverless_compute/all_types/sweep/node_serverless_compute.yml": ["MP803"],
    "pipeline_jobs/serverless_compute/all_types/sweep/pipeline.yml": ["MP803"],
    "pipeline_jobs/serverless_compute/none_pipeline_default_compute_valid/pipeline.yml":
        ["MP803"],
    "command_job/command_job_dist_ray.yml": ["MP803"],  # rayproject/ray:latest
    "command_job/command_job_test_local_env.yml": ["MP803"],  # no tag
    "command_job/command_job_test_yaml_ref.yml": ["MP803"],  # no tag
    "command_job/simple_train_test.yml": ["MP803"],  # no tag
    # MP511: a TensorFlow distribution with 3 parameter servers in an environment that names
    # no TensorFlow 1.x (an inference from the names: the warning says so)
    "command_job/dist_job_3.yml": ["MP511"],
    # MP604 too: job_in_number 10.01 feeds integer inputs; Azure ML reads it as 10
    "pipeline_jobs/helloworld_pipeline_job_inline_comps.yml": ["MP112", "MP604", "MP604"],
    # MP602: a declared pipeline output that no job binds (registered, but never written)
    "pipeline_jobs/helloworld_pipeline_job_register_node_output_name_version.yaml":
        ["MP602", "MP802"],
    "pipeline_jobs/helloworld_pipeline_job_register_pipeline_and_node_output.yaml":
        ["MP602", "MP802"],
    "pipeline_jobs/helloworld_pipeline_job_register_pipeline_output_name_version.yaml":
        ["MP602", "MP802"],
    "pipeline_jobs/helloworld_pipeline_job_with_command_job_with_inputs_outputs.yml":
        ["MP112", "MP112", "MP602"] + ["MP802"] * 5,
    "pipeline_jobs/helloworld_pipeline_job_with_registered_component_output_binding_to_"
    "inline_job_input.yml": ["MP602", "MP602"],
    # MP513: distributed components (9, 16, 5 processes) with an output but no writer declared
    "pipeline_jobs/helloworld_pipeline_job_with_distribution_component.yml":
        ["MP513", "MP513", "MP513"],
}
#: The errors: true too, and the reason `mlpipe compile` refuses the pipeline unless told
#: `--ignore` them (the round trip below exports it regardless).
ERRORS = {
    # MP512: instance_count 2 on `echo Hello World` with no distribution: one node works,
    # the other idles (the guides' "pay for four nodes, train on one")
    "pipeline_jobs/serverless_compute/none_pipeline_default_compute_valid/pipeline.yml":
        ["MP512", "MP512", "MP512", "MP512"],
    # MP512: each trial of the sweep asks for 2 instances (resources.instance_count) and runs
    # `python ./sweep_script.py` with no distribution
    "sweep_job/sweep_job_test_with_resources.yaml": ["MP512"],
}


def _read(path: str):
    from mlpipe.checks import check_pipeline
    from mlpipe.loader import load_spec

    spec, found = load_spec(str(CORPUS / path))
    _, checked = check_pipeline(spec)
    return spec, found + checked


@pytest.mark.parametrize("path", VALID)
def test_every_pipeline_azure_ai_ml_loads_is_read_and_checks_with_no_false_positive(path):
    _, diagnostics = _read(path)
    assert sorted(d.code for d in diagnostics if d.severity.value == "error") == sorted(
        ERRORS.get(path, []))
    assert sorted(d.code for d in diagnostics if d.severity.value == "warning") == sorted(
        FINDINGS.get(path, []))


# --- the round trip and the figure (slow: azure-ai-ml loads each pipeline twice) ----------------

@dataclass
class Outcome:
    path: str
    loads: bool
    refusal: str | None = None
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    differences: list[str] | None = None


def _measure(path: str, out: pathlib.Path) -> Outcome:
    from azure.ai.ml import load_job

    from backends.azure.fidelity import field_differences
    from mlpipe.backends.azure.export import write_export
    from mlpipe.errors import MlpipeError

    try:
        original = load_job(CORPUS / path)
        loads = True
    except Exception:  # what azure-ai-ml refuses is not in the valid set
        original, loads = None, False
    outcome = Outcome(path, loads)
    try:
        spec, diagnostics = _read(path)
    except MlpipeError as err:
        # the figure names files within the corpus, wherever it lies
        outcome.refusal = re.sub(r" \(looked for [^)]*\)", "", err.message.splitlines()[0])
        return outcome
    outcome.errors = sorted(d.code for d in diagnostics if d.severity.value == "error")
    outcome.warnings = sorted(d.code for d in diagnostics if d.severity.value == "warning")
    if loads:
        export = write_export(spec, out, check=False)  # the errors are counted apart
        outcome.differences = field_differences(original, load_job(out / export.job_file))
    return outcome


class _Outcomes(Mapping[str, Outcome]):
    """Every job file's outcome, each measured when first asked for (once per process): a
    parallel run's worker measures the files of the tests it was given, not all of them."""

    def __init__(self, base: pathlib.Path) -> None:
        self.base, self.measured = base, {}
        self.index = {row["path"]: i for i, row in enumerate(ROWS)}

    def __getitem__(self, path: str) -> Outcome:
        if path not in self.measured:
            self.measured[path] = _measure(path, self.base / f"{self.index[path]:02d}")
        return self.measured[path]

    def __iter__(self) -> Iterator[str]:
        return iter(self.index)

    def __len__(self) -> int:
        return len(self.index)


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    from mlpipe.backends.azure.validate import quiet_azure_ai_ml

    quiet_azure_ai_ml()
    return _Outcomes(tmp_path_factory.mktemp("corpus"))


@pytest.mark.slow
@pytest.mark.parametrize("path", VALID)
def test_every_pipeline_azure_ai_ml_loads_comes_back_equal_field_by_field(path, outcomes):
    outcome = outcomes[path]
    assert outcome.loads, f"azure-ai-ml no longer loads {path}; MANIFEST.tsv says it does"
    assert outcome.refusal is None
    assert outcome.differences == []


#: The corpus's folders by the kind of job file they hold (MANIFEST.tsv, README.md).
KINDS = {"pipeline_jobs": "pipelines", "command_job": "command jobs", "sweep_job": "sweeps",
         "automl_job": "AutoML"}


def _kind(path: str) -> str:
    return KINDS.get(path.split("/", 1)[0], "other")


def figure(outcomes: dict[str, Outcome]) -> str:
    """The corpus figure docs/azure.md states, from measured outcomes."""
    from importlib.metadata import version

    valid = [o for o in outcomes.values() if o.loads]
    read = [o for o in valid if o.refusal is None]
    clean = [o for o in read if not o.errors]
    same = [o for o in read if o.differences == []]
    refused = [o for o in valid if o.refusal is not None or o.errors]
    warnings = sorted(c for o in read for c in o.warnings)
    rejected = [o for o in outcomes.values() if not o.loads]
    rejected_refused = [o for o in rejected if o.refusal is not None]
    kinds = list(KINDS.values())

    def by_kind(found: list[Outcome]) -> str:
        return " | ".join(str(sum(1 for o in found if _kind(o.path) == k)) for k in kinds)

    lines = [
        BEGIN,
        f"| the corpus (`{CORPUS.name}`) | all | " + " | ".join(kinds) + " |",
        "|---|---|" + "---|" * len(kinds),
        f"| job files in it | {len(outcomes)} | {by_kind(list(outcomes.values()))} |",
        f"| loaded by azure-ai-ml {version('azure-ai-ml')} (the valid set) | {len(valid)} | "
        f"{by_kind(valid)} |",
        f"| read by mlpipe | {len(read)} | {by_kind(read)} |",
        f"| checked with no error | {len(clean)} | {by_kind(clean)} |",
        f"| exported and loaded back equal field by field (`_to_dict()` and the REST body) | "
        f"**{len(same)}/{len(valid)} round trip** | {by_kind(same)} |",
        f"| refused by mlpipe | **{len(refused)} refusal{'s' if len(refused) != 1 else ''}** | "
        f"{by_kind(refused)} |",
        "",
        f"Warnings on the valid set: {len(warnings)} ("
        + ", ".join(f"{c} x{warnings.count(c)}" for c in sorted(set(warnings)))
        + "), each reviewed as true and pinned per file in `tests/backends/azure/"
          "test_corpus.py`.",
    ]
    if refused:
        lines.append("")
    for o in refused:
        why = o.refusal or (", ".join(f"{c} x{o.errors.count(c)}" for c in sorted(set(o.errors)))
                            + f" (check errors: `mlpipe compile` refuses it unless given "
                              f"`--ignore {','.join(sorted(set(o.errors)))}`; exported "
                              f"regardless, it round-trips)")
        lines.append(f"- refused: `{o.path}`: {why}")
    lines += ["", f"Of the {len(rejected)} that azure-ai-ml rejects, mlpipe reads "
                  f"{len(rejected) - len(rejected_refused)} (it reports what is wrong with "
                  f"them as findings) and refuses {len(rejected_refused)}:"]
    lines += [f"- `{o.path}`: {o.refusal}" for o in rejected_refused]
    lines.append(END)
    return "\n".join(lines)


@pytest.mark.slow
def test_the_docs_figure_is_measured(outcomes):
    measured = figure(outcomes)
    text = DOC.read_text(encoding="utf-8")
    stated = re.search(re.escape(BEGIN) + r".*?" + re.escape(END), text, re.S)
    if updating():
        new = text.replace(stated.group(0), measured) if stated else text + "\n" + measured
        DOC.write_text(new, encoding="utf-8")
        return
    assert stated is not None, "docs/azure.md has no corpus figure; run `make golden`"
    assert stated.group(0) == measured
