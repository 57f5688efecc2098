"""Write docs/tutorial.md (and README's transcript) by running every command they show, so the
transcripts stay true.

Run with ``make tutorial`` (it needs the dev venv with PyTorch); ``gen_tutorial.py --only
azure-ai-ml`` rewrites the last section alone (an azure-ai-ml pipeline through check, submit,
evidence, a signed review, promote and trace), on a project of its own. The commands run in a fresh
project folder (a copy of components/ and pipelines/ in a temporary directory, under git); in
the transcripts that folder is shown as ``~/defect-demo``, where the tutorial tells the reader
to work. Ids, digests and times are those of this run. A command's output is shown as it was
printed; the script fails if any shows a Python warning or a path of the temporary folder
that could not be written as ``~/defect-demo``.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "tutorial.md"
README = ROOT / "README.md"
SHOWN_AS = "~/defect-demo"

BROKEN = '''\
"""A pipeline with a wiring mistake: the label file fed to the examples folder input."""
from components.defect import evaluate, prepare, train
from mlpipe import pipeline


@pipeline(name="broken")
def broken(raw, split):
    p = prepare(raw=raw, split=split)
    t = train(examples=p.examples, labels=p.labels)
    return evaluate(model=t.model, examples=p.labels, labels=p.labels).report
'''


class Session:
    """A project folder and the commands run in it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith(("MLPIPE_", "PYTHONWARNINGS"))}
        self.env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{self.env['PATH']}"
        self.env.update(GIT_AUTHOR_NAME="Ada", GIT_AUTHOR_EMAIL="ada@example.com",
                        GIT_COMMITTER_NAME="Ada", GIT_COMMITTER_EMAIL="ada@example.com")

    def run(self, command: str, *, ok: tuple[int, ...] = (0,)) -> str:
        done = subprocess.run(command, shell=True, cwd=self.root, env=self.env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=900)
        if done.returncode not in ok:
            raise SystemExit(f"`{command}` exited {done.returncode}:\n{done.stdout}")
        text = done.stdout.replace(str(self.root), SHOWN_AS)
        text = text.replace(str(self.root.resolve()), SHOWN_AS)
        noisy = re.search(r"Warning\b|experimental class|Traceback", text)
        if noisy or tempfile.gettempdir() + os.sep in text:
            raise SystemExit(f"`{command}` printed a warning or a scratch path:\n{text}")
        return text.rstrip("\n")

    def shell(self, command: str, *, ok: tuple[int, ...] = (0,), cut: int | None = None) -> str:
        """A transcript block: the command as typed, then what it printed."""
        lines = self.run(command, ok=ok).splitlines()
        if cut is not None and len(lines) > cut:
            lines = [*lines[:cut], "..."]
        return "\n".join(["```", f"$ {command}", *lines, "```"])


def _project(tmp: Path) -> Session:
    root = tmp / "defect-demo"
    root.mkdir()
    for folder in ("components", "pipelines", "policies"):
        shutil.copytree(ROOT / folder, root / folder,
                        ignore=shutil.ignore_patterns("__pycache__"))
    (root / "mlpipe.toml").write_text("# the evidence store: evidence/store.sqlite (default)\n")
    (root / ".gitignore").write_text("evidence/\ndata/\nbuild/\n__pycache__/\n")
    session = Session(root)
    session.run("git init -q && git add -A && git commit -q -m 'The defect classifier'")
    return session


def _first(pattern: str, text: str) -> str:
    found = re.search(pattern, text, re.M)
    if found is None:
        raise SystemExit(f"no match for {pattern!r} in:\n{text}")
    return found.group(1)


def tutorial(s: Session) -> str:
    data = s.shell("python -m components.synthetic data")
    check = s.shell("mlpipe check pipelines/defect_classifier_ddp.py")
    graph = s.shell("mlpipe graph pipelines/defect_classifier_ddp.py")
    (s.root / "pipelines" / "broken.py").write_text(BROKEN)
    broken = s.shell("mlpipe check pipelines/broken.py", ok=(1,))
    explain = s.shell("mlpipe check --explain MP301", cut=14)
    inputs = "--input raw=data/raw --input split=data/split.csv"
    first_cmd = (f"mlpipe submit pipelines/defect_classifier_ddp.py {inputs} --param epochs=15 "
                 f"--local-scale train_cnn=2x2")
    first_out = s.run(first_cmd)
    first = f"```\n$ {first_cmd}\n{first_out}\n```"
    run1 = _first(r"^run (r-[0-9a-f]+) succeeded$", first_out)
    cand1 = _first(r"^candidate (c-[0-9a-f]+)$", first_out)
    evidence = s.shell(f"mlpipe evidence {cand1}")
    second_out = s.run(first_cmd)
    second = f"```\n$ {first_cmd}\n{second_out}\n```"
    run2 = _first(r"^run (r-[0-9a-f]+) succeeded$", second_out)
    if _first(r"^candidate (c-[0-9a-f]+)$", second_out) != cand1:
        raise SystemExit("the fully reused re-run registered a new candidate")
    runs = s.shell("mlpipe runs")
    show = s.shell(f"mlpipe show {run2}")
    why = s.shell(f"mlpipe show {run2} --why train_cnn")
    more = s.shell(f"{first_cmd.replace('epochs=15', 'epochs=20')}")
    run3 = _first(r"^run (r-[0-9a-f]+) succeeded$", more.split("```")[1])
    cand3 = _first(r"^candidate (c-[0-9a-f]+)$", more.split("```")[1])
    steps = s.shell(f"mlpipe evidence {cand3}", cut=None)
    steps = _excerpt(steps, "STEPS", "COORDINATION")
    diff = s.shell(f"mlpipe diff {run1} {run3}", ok=(1,))  # 1: they differ, as diff(1)
    policy = "policies/defect-classifier.yml"
    qualify = s.shell(f"mlpipe qualify {cand1} --policy {policy}")
    rebuild = s.shell(f"mlpipe evidence {cand1} --rebuild --format json -o bundle.json")
    review = s.shell(f"mlpipe review {cand1} --accept --by dana --note 'meets the defect "
                     f"policy' --policy {policy}")
    candidates = s.shell("mlpipe candidates")
    verify = s.shell(f"mlpipe evidence {cand1} --verify")
    s.run("chmod u+w data/raw && printf 'x' >> \"$(ls -d data/raw/*/* | head -1)\"")
    tampered = s.shell(f"mlpipe evidence {cand1} --verify", ok=(1,))
    compiled = s.shell("mlpipe compile pipelines/defect_classifier.py -o build/azure "
                       "--input raw=azureml:defect-images:1 --input split=azureml:defect-split:1")
    files = s.shell("find build/azure -name '*.yml' | sort")
    _readme("check-broken", broken)
    return TEMPLATE.format(SHOWN_AS=SHOWN_AS, BROKEN=BROKEN, **locals())


AML = "pipelines/defect_classifier_aml.py:defect_classifier_aml"
TRUST = """\
identities:
  ci: {public_key: keys/ci.pub, may: [seal]}
  dana: {public_key: keys/dana.pub, may: [decide]}
"""


def azure_ai_ml(s: Session) -> str:
    """The section on an azure-ai-ml pipeline: check, submit, evidence, a signed review,
    promotion into an MLflow registry (a SQLite one in the project) and the trace back."""
    source = (s.root / "pipelines" / "defect_classifier_aml.py").read_text()
    aml_check = s.shell(f"mlpipe check {AML}")
    aml_submit = s.shell(f"mlpipe submit {AML} --input raw=data/raw --input split=data/split.csv")
    aml_cand = _first(r"^candidate (c-[0-9a-f]+)$", aml_submit)
    s.run("mlpipe keys generate keys/ci.pem")
    aml_keys = s.shell("mlpipe keys generate keys/dana.pem")
    (s.root / "trust.yml").write_text(TRUST)
    with (s.root / "mlpipe.toml").open("a") as fh:
        fh.write('[signing]\nkey = "keys/ci.pem"\n')
    aml_evidence = _excerpt(s.shell(f"mlpipe evidence {aml_cand}"), "FINDINGS", "PROVENANCE")
    policy = "policies/defect-classifier.yml"
    aml_review = s.shell(f"mlpipe review {aml_cand} --accept --key keys/dana.pem --trust "
                         f"trust.yml --policy {policy} --note 'the DDP model meets the policy'")
    registry = "--tracking-uri sqlite:///registry.db"
    aml_promote = s.shell(f"mlpipe promote {aml_cand} --name defect-cnn --by ci {registry}")
    aml_trace = s.shell(f"mlpipe trace models:/defect-cnn/1 {registry}")
    return AML_TEMPLATE.format(TRUST=TRUST, **locals())


def _splice(text: str, section: str) -> str:
    """``text`` with its azure-ai-ml section (between the markers) replaced by ``section``."""
    begin, end = "<!-- begin azure-ai-ml -->\n", "<!-- end azure-ai-ml -->"
    head, found, rest = text.partition(begin)
    if not found:
        return text.rstrip("\n") + "\n\n" + begin + section.rstrip("\n") + "\n" + end + "\n"
    return head + begin + section.rstrip("\n") + "\n" + end + rest.split(end, 1)[1]


def _readme(name: str, block: str) -> None:
    """Put ``block`` between README's ``begin NAME`` and ``end NAME`` markers."""
    text = README.read_text()
    found = re.search(rf"(<!-- begin {name}:[^>]*-->\n).*?(<!-- end {name} -->)", text, re.S)
    if found is None:
        raise SystemExit(f"README.md has no <!-- begin {name}: ... --> marker")
    README.write_text(text[:found.end(1)] + block + "\n" + text[found.start(2):])


def _excerpt(block: str, start: str, stop: str) -> str:
    lines = block.strip("`\n").splitlines()
    head = lines[0]
    body = lines[1:]
    i = next(n for n, line in enumerate(body) if line == start)
    j = next(n for n, line in enumerate(body) if line == stop)
    return "```\n" + "\n".join([head, "...", *body[i:j]]) + "...\n```"


TEMPLATE = textwrap.dedent('''\
    # Tutorial: the defect classifier, end to end

    <!-- Generated by scripts/gen_tutorial.py (`make tutorial`): every block below is what the
         command printed when this page was written. Do not edit by hand. -->

    This walks through the example in `components/` and `pipelines/`: a visual-defect
    classifier whose training step is PyTorch DDP. It runs entirely on this machine; the
    distributed step is launched the way Azure ML would launch it. You need the dev install
    with PyTorch (`make test` makes one; `pip install -e '.[authoring,torch]'` in your own venv).
    Work in a project folder, here `{SHOWN_AS}` holding a copy of `components/` and
    `pipelines/` under git (the commit is what the evidence names as the code revision).
    The evidence store and its artifacts live in `evidence/` in the project: the first run
    in a project appends `/evidence/` (and `/.amlignore`, which `mlpipe compile` writes) to
    its `.gitignore` unless git ignores the store already (this project's `.gitignore` does),
    so `git add -A` never commits them. Commit that `.gitignore` change.

    ## Make a data set

    {data}

    300 synthetic 8x8 images of three classes (`ok`, `scratch`, `dent`) and a split manifest.

    ## Check before anything runs

    {check}

    `mlpipe check` compiles the pipeline and runs every check ([checks.md](checks.md)):
    wiring, parameter ranges, Azure ML types, the contracts on every edge, and the launch
    design of the distributed step. The DAG:

    {graph}

    A mistake reads like a linter. `pipelines/broken.py` passes the label file where the
    evaluation expects the examples folder:

    ```python
    {BROKEN}```

    {broken}

    Each code is documented:

    {explain}

    ## Run it here

    {first}

    The training step declares 2 nodes x 4 GPUs; `--local-scale train_cnn=2x2` launches it
    as 2 nodes x 2 CPU processes here (gloo), with exactly the variables Azure ML sets, and
    records both topologies. The run's evidence:

    {evidence}

    ## Run it again: reuse

    {second}

    Nothing changed, so every step is reused from the first run, by content. The store says
    where each output came from:

    {runs}

    {show}

    {why}

    The re-run reproduced the same model and evaluation bytes, so it registered no new
    candidate: it is recorded as another production of the first run's (`show` says so).

    Change a parameter and only what depends on it runs again:

    {more}

    The new candidate's evidence says plainly which steps were not executed for it:

    {steps}

    {diff}

    ## Qualify and decide

    Orchestration never accepts a candidate. A policy states the acceptance criteria
    ([review.md](review.md)); `qualify` judges them against the sealed bundle and decides
    nothing:

    {qualify}

    A reviewer records the decision; it cites the exact bundle digest they read, and the next
    bundle, sealed with it, records it. The re-run above is part of the candidate's record
    now, so the store no longer matches the bundle sealed before it: `review` refuses a
    decision on it (MP715) until the bundle is sealed again and read:

    {rebuild}

    {review}

    {candidates}

    ## Verify the evidence

    {verify}

    Change one input image and verify again:

    {tampered}

    ## Export to Azure ML

    {compiled}

    {files}

    `az ml job create --file build/azure/pipeline.yml` submits it; `mlpipe submit ... --target
    azure` records the run first and `mlpipe sync RUN` brings the child jobs back into the
    store ([azure.md](azure.md)).
    ''')


AML_TEMPLATE = textwrap.dedent('''\
    ## A pipeline written with azure-ai-ml

    A team whose pipelines are already azure-ai-ml Python reaches the same review half
    without rewriting them ([azure.md](azure.md#azure-ai-ml-python-pipelines-filepyname)).
    `pipelines/defect_classifier_aml.py` is the classifier as such a team writes it:
    `command()` steps running the scripts in `pipelines/aml_src/`, the trainer given a
    `PyTorchDistribution` (DDP, 2 processes), and the candidate named in tags that azure-ai-ml
    and Azure ML carry and ignore:

    ```python
    {source}```

    mlpipe reads it as azure-ai-ml would submit it (the REST body of
    `ml_client.jobs.create_or_update(job)`, built offline) and runs every check on it; a
    finding points at the line that assigns the node:

    {aml_check}

    Both are true: nothing declares that the examples folder keeps its splits apart (the
    mlpipe form says so with an `ImageFolder` contract), and the trainer names no VM size.
    Run it here, the DDP step as 2 gloo processes with the variables Azure ML sets:

    {aml_submit}

    Its evidence says what the scripts did not record (they do not use `mlpipe.runtime`):

    {aml_evidence}

    A reviewer signs the decision with their own key, and the bundles are sealed with the
    project's (`[signing] key = "keys/ci.pem"` in `mlpipe.toml`); `trust.yml` says who may do
    what ([signing.md](signing.md)):

    ```yaml
    {TRUST}```

    {aml_keys}

    {aml_review}

    Then promote it into an MLflow model registry (here a SQLite one in the project) and trace
    the registered model back to the candidate, its evidence and the decision:

    {aml_promote}

    {aml_trace}
    ''')


def main() -> None:
    only = sys.argv[1:] == ["--only", "azure-ai-ml"]
    if sys.argv[1:] and not only:
        raise SystemExit("usage: gen_tutorial.py [--only azure-ai-ml]")
    with tempfile.TemporaryDirectory(prefix="mlpipe-tutorial-") as tmp:
        session = _project(Path(tmp))
        if only:  # the azure-ai-ml section alone, in place, on a project of its own
            session.run("python -m components.synthetic data")
            text = _splice(OUT.read_text(), azure_ai_ml(session))
        else:
            text = _splice(tutorial(session), azure_ai_ml(session))
    OUT.write_text(text.rstrip("\n") + "\n")
    print(f"wrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
