"""Fields of a job beyond its launch block, judged against docs/rules.md: the packages its
command installs when it runs (MP536), a registered component it runs by a label or without a
version (MP802), the GPUs a declared CUDA_VISIBLE_DEVICES leaves each node (MP502), and the
world size the DeepSpeed configuration its command or body names
implies (read by MP503). The same spec fields for mlpipe Python, Azure
ML YAML and azure-ai-ml Python; files are read, nothing is imported or run.
"""
from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Iterator
from typing import Any

from mlpipe import codes
from mlpipe.checks.body import BodyFacts, step_facts
from mlpipe.checks.flows import call_at
from mlpipe.checks.registry import check
from mlpipe.checks.where import at_code, at_step, help_for
from mlpipe.diagnostics import Diagnostic
from mlpipe.graph import Graph, StepNode

#: An installer run by a command: pip (also ``python -m pip``, ``uv pip``), conda, mamba, apt.
_INSTALL = re.compile(r"(?<![\w-])(?:(?:python[\d.]*\s+-m\s+)?pip3?|uv\s+pip|conda|mamba|"
                      r"micromamba|apt-get|apt)\s+install\b[^;&|\n]*")
#: Installs that take nothing from an index: the code's own folder without its dependencies,
#: or from files that travel with the code.
_OFFLINE = re.compile(r"--no-deps|--no-index|--offline")


def _installs(text: str) -> str | None:
    for m in _INSTALL.finditer(text):
        if not _OFFLINE.search(m.group(0)):
            return m.group(0).strip()
    return None


@check(codes.INSTALL_AT_RUN_TIME)
def install_at_run_time(graph: Graph) -> Iterator[Diagnostic]:
    for node, facts in step_facts(graph):
        c = node.component
        found = [(cmd, None) for cmd in [c.command] if cmd and _installs(cmd)]
        if facts is not None and not facts.empty:
            found += [(cmd, line) for cmd, line in facts.commands if _installs(cmd)]
        for cmd, line in found[:1]:
            env = c.environment
            pinned = "the environment it declares"
            if env is not None and env.name:
                pinned = f"environment {env.name!r}" + (
                    f" version {env.version}" if getattr(env, "version", None) else "")
            yield Diagnostic.of(
                codes.INSTALL_AT_RUN_TIME,
                f"step '{node.id}' runs {_installs(cmd)!r} when it starts: the packages it "
                f"gets are whatever the index serves on the day, not what {pinned} pins, so "
                f"two runs of one definition may run different software",
                hint=help_for(node, "install the packages in the environment (its conda file or "
                                    "image) and pin its version; keep the command to running "
                                    "the step",
                              "move the install into the environment's conda file or image and "
                              "pin the environment's version; keep command: to running the "
                              "script"), **at_code(node, facts, line))


#: A DeepSpeed configuration the command names (``--deepspeed ds.json``,
#: ``--deepspeed_config=ds.json``).
_DS_FLAG = re.compile(r"^--deepspeed(?:_config)?(?:=(.+))?$")


def _named_in_command(command: str | None) -> str | None:
    try:
        words = shlex.split(command or "")
    except ValueError:
        return None
    for i, word in enumerate(words):
        m = _DS_FLAG.match(word)
        if m is None:
            continue
        path = m.group(1) or (words[i + 1] if i + 1 < len(words) else "")
        if path.endswith(".json"):
            return path
    return None


def _named_in_body(facts: BodyFacts | None) -> str | None:
    hit = facts.uses("deepspeed.initialize") if facts is not None else None
    call = call_at(facts, hit[1], hit[0]) if facts is not None and hit else None
    for kw in call.keywords if call is not None else []:
        value = getattr(kw.value, "value", None)
        if kw.arg in ("config", "config_params") and isinstance(value, str) \
                and value.endswith(".json"):
            return value
    return None


def _config(node: StepNode, facts: BodyFacts | None) -> tuple[str, dict[str, Any]] | None:
    """The DeepSpeed configuration file the step names, as (path, its settings), when it is
    there to read (relative to the code folder, else to the module's folder)."""
    c = node.component
    named = _named_in_command(c.command) or _named_in_body(facts)
    if named is None:
        return None
    folders = [c.code] if c.code else []
    if c.location is not None:
        folders.append(os.path.dirname(c.location.file))
    for folder in folders:
        path = os.path.join(folder, named)
        try:
            with open(path, encoding="utf-8") as fh:
                data = json.load(fh)
        except (OSError, ValueError):
            continue
        return (named, data) if isinstance(data, dict) else None
    return None


def _ints(data: dict[str, Any]) -> dict[str, int]:
    keys = ("train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps")
    return {k: v for k in keys if isinstance(v := data.get(k), int) and not isinstance(v, bool)
            and v > 0}


def deepspeed_world_size(node: StepNode, facts: BodyFacts | None
                         ) -> tuple[str, int | float] | None:
    """The world size a DeepSpeed configuration the step names states, where it gives all of
    train_batch_size, train_micro_batch_size_per_gpu and gradient_accumulation_steps (DeepSpeed
    refuses to start unless the first is the product of the others and the world size): (where
    it is stated, the world size it implies, a fraction where none would do).

    Example:
        >>> deepspeed_world_size(node, facts)
        ("DeepSpeed configuration 'ds.json' (train_batch_size 64 = 8 x 2 x world size)", 4)
    """
    found = _config(node, facts)
    given = _ints(found[1]) if found is not None else {}
    if found is None or len(given) < 3:
        return None
    total, micro = given["train_batch_size"], given["train_micro_batch_size_per_gpu"]
    steps = given["gradient_accumulation_steps"]
    world = total / (micro * steps)
    where = (f"DeepSpeed configuration {found[0]!r}: train_batch_size {total} = "
             f"train_micro_batch_size_per_gpu {micro} x gradient_accumulation_steps {steps} x "
             f"the world size")
    return where, int(world) if world.is_integer() else round(world, 3)


#: A registered component as the importer names it: ``(azureml:NAME@LABEL)``, ``(azureml:NAME)``,
#: ``(azureml:NAME:VERSION)`` or a registry's ``azureml://registries/.../components/...``.
_REGISTERED = re.compile(r"\((azureml:[^()\s]+)\)")


def _component_moves(reference: str) -> str | None:
    """Why a component reference names no fixed version, or None when it names one."""
    if reference.startswith("azureml://"):
        if "/labels/" in reference:
            return ("by a label (it names whichever version carries it when the job is "
                    "submitted)")
        return None if "/versions/" in reference else "with no version"
    name = reference[len("azureml:"):]
    if "@" in name:
        return (f"by the label {name.split('@', 1)[1]!r} (it names whichever version carries "
                f"it when the job is submitted)")
    return None if ":" in name else ("with no version (Azure ML resolves one when the job is "
                                     "submitted)")


@check(codes.MOVING_REFERENCE)
def component_by_label(graph: Graph) -> Iterator[Diagnostic]:
    for node in graph.step_nodes():
        m = _REGISTERED.search(node.component.azure_only or "")
        why = _component_moves(m.group(1)) if m else None
        if m is None or why is None:
            continue
        name = m.group(1).split("@")[0].rstrip("/")
        yield Diagnostic.of(
            codes.MOVING_REFERENCE,
            f"step '{node.id}' runs the registered component {m.group(1)!r} {why}: the "
            f"code it runs can change while the pipeline's text does not",
            hint=f"pin a version: component: {name}:N (the version you reviewed)",
            **at_step(node))


def _visible(node: StepNode) -> tuple[str, int] | None:
    """(where, how many devices) a declared CUDA_VISIBLE_DEVICES shows each process: the
    job's environment variables first, then its environment's; None when neither sets it or
    its value is not a list of devices."""
    c = node.component
    stated = [("environment variable", v) for k, v in c.environment_variables
              if k == "CUDA_VISIBLE_DEVICES"]
    if c.environment is not None:
        stated += [(f"environment {c.environment.name!r}'s variable", v)
                   for k, v in c.environment.variables if k == "CUDA_VISIBLE_DEVICES"]
    for where, value in stated[:1]:
        devices = [d.strip() for d in str(value).split(",") if d.strip()]
        if all(re.fullmatch(r"\d+|GPU-[\w-]+|MIG-[\w/-]+", d) for d in devices):
            return f"{where} CUDA_VISIBLE_DEVICES={value!r}", len(devices)
    return None


@check(codes.PROCESSES_GPUS_MISMATCH)
def visible_devices(graph: Graph) -> Iterator[Diagnostic]:
    for node in graph.step_nodes():
        dist = node.component.distribution
        if dist is None or dist.type not in ("pytorch", "mpi"):
            continue
        per_node = dist.processes_per_instance()
        shown = _visible(node)
        if shown is None or shown[1] == 0 or per_node <= shown[1]:
            continue  # none shown: GPUs hidden on purpose (a CPU run over gloo)
        where, count = shown
        yield Diagnostic.of(
            codes.PROCESSES_GPUS_MISMATCH,
            f"step '{node.id}' starts {per_node} processes per node, but its {where} shows "
            f"each of them {count} GPU{'s' if count != 1 else ''}: "
            f"{per_node - count} process(es) have no GPU of their own, and cuda:LOCAL_RANK "
            f"does not exist past cuda:{max(count - 1, 0)}",
            hint="remove CUDA_VISIBLE_DEVICES from the job (Azure ML shows every process all "
                 "of the node's GPUs; each picks cuda:LOCAL_RANK), or start as many processes "
                 "per node as it lists", **at_step(node))
