"""Environment and compute checks (MP632-MP633): can the step's environment and VM size run
what the step declares and what its code does?

An environment supplies software, not hardware: MP632 reads the declared conda file (its conda
and pip dependencies, and the pip requirement files it names) for the frameworks the declared
distribution and the body's imports need; MP633 compares the GPU work the body does
unconditionally with a VM size that has no GPU. A registered environment is read from its
declaration in the project (``environments/*.yml``); one declared nowhere cannot be read here
and is not judged. Nothing is imported or installed.
"""
from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from mlpipe import codes
from mlpipe.checks.body import BodyFacts, step_facts
from mlpipe.checks.registry import check
from mlpipe.checks.where import at_code, at_step
from mlpipe.compute import CATALOGUE
from mlpipe.diagnostics import Diagnostic
from mlpipe.distribution import PyTorch, TensorFlow
from mlpipe.environments import declared_conda_file
from mlpipe.graph import Graph, StepNode

#: framework (its import name) -> the distributions that install it (themselves, or as a
#: dependency they require); a conda file listing none of them does not provide it.
PROVIDERS: dict[str, frozenset[str]] = {
    "torch": frozenset({
        "torch", "pytorch", "pytorch-gpu", "pytorch-cpu", "torchvision", "torchaudio",
        "torchtext", "torchdata", "torchmetrics", "deepspeed", "lightning", "pytorch-lightning",
        "timm", "accelerate", "peft", "trl", "sentence-transformers", "ultralytics", "fairseq",
        "torch-geometric", "pytorch-ignite", "fastai", "detectron2", "mmcv", "onnxruntime-training",
        "torch-ort", "bitsandbytes", "xformers", "vllm", "flash-attn", "torch-tb-profiler",
        "opacus", "captum", "skorch", "monai", "kornia", "pyro-ppl", "gpytorch", "botorch",
        "open-clip-torch", "diffusers", "transformers[torch]", "azureml-acft-accelerator"}),
    "tensorflow": frozenset({
        "tensorflow", "tensorflow-gpu", "tensorflow-cpu", "tf-nightly", "tensorflow-macos",
        "tensorflow-intel", "tensorflow-aarch64", "intel-tensorflow", "tensorflow-rocm",
        "tf-keras", "tensorflow-text", "tensorflow-addons", "tensorflow-recommenders",
        "tensorflow-model-optimization", "tf-models-official", "tensorflow-decision-forests"}),
    "horovod": frozenset({"horovod"}),
    "deepspeed": frozenset({"deepspeed"}),
    "mpi4py": frozenset({"mpi4py"}),
    "jax": frozenset({"jax", "jaxlib", "flax", "optax", "chex", "orbax", "orbax-checkpoint"}),
    "xgboost": frozenset({"xgboost", "py-xgboost", "py-xgboost-gpu", "py-xgboost-cpu"}),
    "lightgbm": frozenset({"lightgbm"}),
}
#: Words in an image name that say the image was built with the framework (its packages may
#: be there, so the conda file alone does not settle it).
_IMAGE_HINTS = {"torch": ("pytorch", "torch", "acpt", "deepspeed"),
                "tensorflow": ("tensorflow", "tf2", "tf-"), "horovod": ("horovod",),
                "deepspeed": ("deepspeed", "acpt"), "mpi4py": ("mpi4py",), "jax": ("jax",),
                "xgboost": ("xgboost",), "lightgbm": ("lightgbm",)}
#: Images known to carry no ML framework (Azure ML's own base images, plain OS, Python, conda
#: and CUDA images): only over one of these (or no image: Azure ML's default base) does the
#: conda file settle what the environment holds.
_BARE_IMAGE = re.compile(
    r"^(mcr\.microsoft\.com/azureml/(openmpi|intelmpi|base|minimal)[\w.-]*"
    r"|(docker\.io/)?(library/)?(ubuntu|debian|python|alpine|centos|rockylinux|buildpack-deps)"
    r"|(docker\.io/)?(continuumio/miniconda3?|mambaorg/micromamba|condaforge/\w+)"
    r"|(docker\.io/|nvcr\.io/)?nvidia/cuda)([:@]|$)")
_SPLIT = re.compile(r"[=<>!~\[\s@;]")


def _name(requirement: str) -> str | None:
    text = requirement.strip()
    if not text or text.startswith(("#", "-", "--")):
        return None
    egg = re.search(r"#egg=([\w.-]+)", text)
    if egg:
        return egg.group(1).lower().replace("_", "-")
    if "://" in text or text.endswith((".whl", ".tar.gz", ".zip")):
        stem = text.rsplit("/", 1)[-1]
        return stem.split("-", 1)[0].lower().replace("_", "-") if stem else None
    text = text.split("::", 1)[-1]  # a conda channel prefix: pytorch::pytorch
    base = _SPLIT.split(text, 1)[0]
    return base.lower().replace("_", "-") or None


def _requirements(path: Path, seen: set[Path]) -> tuple[set[str], bool]:
    """The names a pip requirements file installs (following ``-r``), and whether it could
    be read whole."""
    if path in seen:
        return set(), True
    seen.add(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return set(), False
    names: set[str] = set()
    whole = True
    for line in lines:
        line = line.split(" #", 1)[0].strip()
        m = re.match(r"^(?:-r|--requirement)[\s=]+(\S+)", line)
        if m:
            more, ok = _requirements((path.parent / m.group(1)).resolve(), seen)
            names |= more
            whole = whole and ok
        elif (n := _name(line)) is not None:
            names.add(n)
    return names, whole


def conda_packages(conda_file: Path) -> set[str] | None:
    """Every package a conda specification installs by name (conda dependencies, pip
    dependencies and the requirement files its pip section names), normalized
    (``scikit_learn`` -> ``scikit-learn``); None when it cannot be read whole.

    Example:
        >>> sorted(conda_packages(Path("tests/fixtures/checks/envs/train-with-torch.yml")))
        ['mlpipe', 'numpy', 'pip', 'python', 'torch']
    """
    import yaml

    try:
        doc = yaml.safe_load(conda_file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    if not isinstance(doc, dict):
        return None
    names: set[str] = set()
    for dep in doc.get("dependencies") or []:
        if isinstance(dep, str):
            n = _name(dep)
            if n:
                names.add(n)
        elif isinstance(dep, dict):
            for item in dep.get("pip") or []:
                if not isinstance(item, str):
                    continue
                m = re.match(r"^(?:-r|--requirement)[\s=]+(\S+)", item.strip())
                if m:
                    more, whole = _requirements((conda_file.parent / m.group(1)).resolve(),
                                                set())
                    if not whole:
                        return None
                    names |= more
                elif (n := _name(item)) is not None:
                    names.add(n)
    return names


def conda_of(node: StepNode) -> tuple[Path, str] | None:
    """The conda file that builds the step's environment and how messages name it: its own
    ``conda_file``, or the one the project declares for the registered environment it names
    (``environments/*.yml``: docs/azure.md); None when neither can be read here."""
    c = node.component
    return declared_conda_file(c.environment, c.location.file if c.location else None)


def _needed(node: StepNode, facts: BodyFacts | None) -> list[tuple[str, str]]:
    """(framework, why) for each framework the step needs."""
    dist = node.component.distribution
    found: list[tuple[str, str]] = []
    if isinstance(dist, PyTorch):
        found.append(("torch", "its PyTorch distribution"))
    elif isinstance(dist, TensorFlow):
        found.append(("tensorflow", "its TensorFlow distribution"))
    if facts is not None:
        tops = {i.split(".")[0] for i in facts.imports}
        for framework in PROVIDERS:
            if framework in tops and all(f != framework for f, _ in found):
                found.append((framework, f"its code imports {framework}"))
    return found


@check(codes.FRAMEWORK_MISSING_FROM_ENVIRONMENT)
def framework_in_environment(graph: Graph) -> Iterator[Diagnostic]:
    read: dict[Path, set[str] | None] = {}
    for node, facts in step_facts(graph):
        c = node.component
        conda, env = conda_of(node), c.environment
        if conda is None or env is None:
            continue
        path, conda_shown = conda
        needed = _needed(node, facts)
        if not needed:
            continue
        if path not in read:
            read[path] = conda_packages(path)
        packages = read[path]
        if packages is None:
            continue
        image = (env.image or "").lower()
        if image and not _BARE_IMAGE.match(image):
            continue  # what this image carries is not known here: the framework may be in it
        for framework, why in needed:
            if packages & PROVIDERS[framework]:
                continue
            if any(h in image for h in _IMAGE_HINTS[framework]):
                continue  # the image may carry it; the conda file alone does not settle it
            shown = "pytorch/torch" if framework == "torch" else framework
            yield Diagnostic.of(
                codes.FRAMEWORK_MISSING_FROM_ENVIRONMENT,
                f"step '{node.id}' needs {framework} ({why}) but the conda file of "
                f"environment {env.name!r} ({conda_shown}) installs no "
                f"{shown}, nor a package that requires it: the step would fail with 'No "
                f"module named {framework}'",
                hint=f"add {framework if framework != 'torch' else 'torch'} to the conda file's "
                     f"dependencies (pinned), or run the step in an environment that has it",
                **at_step(node))


@check(codes.ACCELERATOR_CODE_ON_CPU_SIZE)
def accelerator_on_cpu(graph: Graph) -> Iterator[Diagnostic]:
    for node, facts in step_facts(graph):
        c = node.component
        if c.compute is None or facts is None or not facts.gpu_calls:
            continue
        size = CATALOGUE.resolve(c.compute)[0]
        if size is None or size.has_gpu:
            continue
        if facts is None or not facts.gpu_calls or facts.device_checked:
            continue
        what, line = facts.gpu_calls[0]
        yield Diagnostic.of(
            codes.ACCELERATOR_CODE_ON_CPU_SIZE,
            f"step '{node.id}' runs on {size.describe()} but its code calls {what} without "
            f"asking whether a GPU is there: the call fails on a size without a GPU",
            hint="move the step to a GPU size (Compute(..., sku='Standard_NC6s_v3')), or pick "
                 "the device at run time (mlpipe.runtime.device(), or 'cuda' if "
                 "torch.cuda.is_available() else 'cpu')",
            **at_code(node, facts, line))
