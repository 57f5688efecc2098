"""Fields of a job judged against docs/rules.md, beyond those ``checks.fields`` reads: launch
variables the job itself declares (MP529), NCCL told not to use the InfiniBand a multi-node job
pays for (MP538), more threads per node than its VM size has vCPUs (MP539), outputs bound to a
fixed datastore path (MP806), a serverless step with no VM size whose code needs a GPU (MP516),
and the world size a launcher's or accelerate's configuration states (read by MP503). The
spec's fields for mlpipe Python; the job's document (kept as the spec's origin) for Azure ML
YAML and azure-ai-ml Python, which mlpipe reads as the YAML it would submit. Files are read,
nothing is imported or run.
"""
from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from typing import Any

from mlpipe import codes
from mlpipe.checks.body import step_facts
from mlpipe.checks.frameworks import MPI_VARS, PYTORCH_VARS, framework_of, framework_steps
from mlpipe.checks.registry import check
from mlpipe.checks.where import at_code, at_pipeline, at_step, help_for, written_in
from mlpipe.compute import CATALOGUE
from mlpipe.diagnostics import Diagnostic, Severity
from mlpipe.graph import Graph, StepNode


def declared_variables(node: StepNode) -> list[tuple[str, str, str]]:
    """``(name, value, where)`` for each environment variable the job declares (its own
    ``environment_variables`` first, then its environment's)."""
    c = node.component
    found = [(k, str(v), "environment variable") for k, v in c.environment_variables]
    if c.environment is not None:
        found += [(k, str(v), f"environment {c.environment.name!r}'s variable")
                  for k, v in c.environment.variables]
    return found


def _injected(framework: str, variable: str) -> bool:
    """Whether a job's own value for ``variable`` replaces what its launch injects. Not
    WORLD_SIZE (MP503 compares its value with the launch) nor MASTER_PORT (the launch gives
    every node one port too)."""
    if variable in ("WORLD_SIZE", "MASTER_PORT"):
        return False
    if framework == "pytorch":
        return variable in PYTORCH_VARS
    if framework == "tensorflow":
        return variable == "TF_CONFIG"
    return bool(MPI_VARS.match(variable))


_EFFECT = {True: "every node would look for the rendezvous at the address it names",
           False: "every process gets the same value, so the ranks no longer tell themselves "
                  "apart"}


@check(codes.LAUNCH_VARIABLE_OVERWRITTEN)
def declared_launch_variables(graph: Graph) -> Iterator[Diagnostic]:
    for node, framework in framework_steps(graph):
        for name, value, where in declared_variables(node):
            if not _injected(framework, name):
                continue   # another framework's variable is MP518
            address = name == "MASTER_ADDR"
            one_node = node.component.instances == 1
            yield Diagnostic.of(
                codes.LAUNCH_VARIABLE_OVERWRITTEN,
                f"step '{node.id}' declares {where} {name}={value!r}, which Azure ML sets in "
                f"each process of its {framework} launch: {_EFFECT[address]}",
                hint=help_for(node, f"remove {name} from environment_variables= (the launch "
                                    f"sets it; the code reads it from the environment)",
                              f"remove {name} from the job's environment_variables: (the "
                              f"launch sets it; the script reads it from the environment)",
                              f"remove {name} from environment_variables= of command() (the "
                              f"launch sets it; the script reads it from the environment)"),
                severity=Severity.WARNING if address and one_node else Severity.ERROR,
                **at_step(node))


#: NCCL settings that keep its traffic off InfiniBand.
_OFF_INFINIBAND = {"NCCL_IB_DISABLE": re.compile(r"^\s*(1|true|yes)\s*$", re.I),
                   "NCCL_NET": re.compile(r"^\s*socket\s*$", re.I)}


@check(codes.INFINIBAND_DISABLED)
def infiniband_disabled(graph: Graph) -> Iterator[Diagnostic]:
    for node in graph.step_nodes():
        c = node.component
        if framework_of(node) not in ("pytorch", "mpi") or c.instances < 2:
            continue
        size, _, _ = CATALOGUE.resolve(c.compute)
        if size is None or not size.has_gpu or not size.infiniband:
            continue   # without InfiniBand there is none to lose (MP506 says so)
        for name, value, where in declared_variables(node):
            pattern = _OFF_INFINIBAND.get(name)
            if pattern is None or not pattern.match(value):
                continue
            yield Diagnostic.of(
                codes.INFINIBAND_DISABLED,
                f"step '{node.id}' trains on {c.instances} nodes of {size.describe()}, but its "
                f"{where} {name}={value!r} keeps NCCL off InfiniBand: collectives between "
                f"nodes go over Ethernet on a size chosen for its InfiniBand",
                hint=f"remove {name} (NCCL finds the InfiniBand itself), or use a size without "
                     f"InfiniBand if the job is meant to run over Ethernet", **at_step(node))
            break


@check(codes.THREADS_EXCEED_CORES)
def threads_per_node(graph: Graph) -> Iterator[Diagnostic]:
    for node in graph.step_nodes():
        c = node.component
        dist = c.distribution
        per_node = dist.processes_per_instance() if framework_of(node) in ("pytorch", "mpi") \
            and dist is not None else 1
        size, _, _ = CATALOGUE.resolve(c.compute)
        if size is None or not size.vcpus:
            continue
        for name, value, where in declared_variables(node):
            if name != "OMP_NUM_THREADS" or not value.strip().isdigit():
                continue
            threads = int(value) * per_node
            if threads > size.vcpus:
                yield Diagnostic.of(
                    codes.THREADS_EXCEED_CORES,
                    f"step '{node.id}' starts {per_node} process(es) per node, each told by its "
                    f"{where} OMP_NUM_THREADS={value.strip()!r} to run {int(value)} threads: "
                    f"{threads} threads on the {size.vcpus} vCPUs of {size.name}, so they "
                    f"take turns on the cores",
                    hint=f"set OMP_NUM_THREADS to at most {max(size.vcpus // per_node, 1)} "
                         f"(the node's vCPUs over its processes), or leave it out",
                    **at_step(node))
            break


def job_document(node: StepNode) -> Mapping[str, Any] | None:
    """The job as its pipeline's Azure ML document writes it (YAML, or what azure-ai-ml would
    submit), or None for a step mlpipe Python declares."""
    origin = node.pipeline.origin
    doc = origin.document if origin is not None else None
    if not isinstance(doc, Mapping):
        return None
    jobs = doc.get("jobs")
    if isinstance(jobs, Mapping):
        job = jobs.get(node.step.name)
        return job if isinstance(job, Mapping) else None
    return doc if doc.get("type") == "command" else None


#: A datastore or storage URI (``azureml://datastores/x/paths/...``, ``abfss://``, ``https://``).
_STORAGE = re.compile(r"^(azureml://datastores/|abfss?://|wasbs?://|https?://|adl://)", re.I)


def fixed_path(value: Any) -> str | None:
    """The path an output binding names when every run writes it: a storage URI with no
    expression Azure ML fills per run (``${{name}}``, ``{output_name}``)."""
    path = value.get("path") if isinstance(value, Mapping) else None
    if not isinstance(path, str) or "{" in path or not _STORAGE.match(path.strip()):
        return None
    return path.strip()


def _key(path: str) -> str:
    return path.rstrip("/").lower()


@check(codes.OUTPUT_PATH_FIXED)
def output_paths(graph: Graph) -> Iterator[Diagnostic]:
    seen: dict[str, str] = {}
    for node in graph.step_nodes():
        job = job_document(node)
        outputs = job.get("outputs") if job is not None else None
        for port, value in outputs.items() if isinstance(outputs, Mapping) else []:
            path = fixed_path(value)
            if path is not None:
                yield _fixed(node, f"output '{node.id}.{port}'", path, seen, at_step(node, port))
    origin = graph.spec.origin
    doc = origin.document if origin is not None else None
    outputs = doc.get("outputs") if isinstance(doc, Mapping) else None
    for name, value in outputs.items() if isinstance(outputs, Mapping) else []:
        path = fixed_path(value)
        if path is not None:
            yield _fixed(None, f"pipeline output {name!r}", path, seen, at_pipeline(graph))


def _fixed(node: StepNode | None, what: str, path: str, seen: dict[str, str],
           where: dict[str, Any]) -> Diagnostic:
    other = seen.setdefault(_key(path), what)
    shared = other != what
    said = (f"{what} is bound to {path!r}, as {other} is: two outputs write one place, so "
            f"what one writes the other overwrites" if shared else
            f"{what} is bound to the fixed path {path!r}: every run writes the same place, so "
            f"a later run replaces the files an earlier run's evidence names")
    hint = ("put ${{name}} in the path (azureml://datastores/NAME/paths/PREFIX/${{name}}/"
            "${{output_name}}/, one folder per job), or leave path: out and let Azure ML "
            "choose one; register the result as a versioned asset to keep it")
    if node is not None and written_in(node) == "sdk":
        hint = hint.replace("leave path: out", "give Output(...) no path=")
    return Diagnostic.of(codes.OUTPUT_PATH_FIXED, said, hint=hint,
                         severity=Severity.ERROR if shared else Severity.WARNING, **where)


def _serverless_without_size(node: StepNode) -> bool:
    c = node.component
    if c.compute is None:
        return written_in(node) != "python" and (job_document(node) or {}).get(
            "compute") in (None, "serverless", "azureml:serverless")
    return c.compute.name in (None, "serverless", "azureml:serverless") and not c.compute.sku


@check(codes.UNKNOWN_VM_SIZE)
def serverless_default_size(graph: Graph) -> Iterator[Diagnostic]:
    for node, facts in step_facts(graph):
        c = node.component
        if c.distribution is not None or c.instances > 1 or facts is None or \
                not facts.gpu_calls or not _serverless_without_size(node):
            continue   # a distributed one is MP516 already
        call, line = facts.gpu_calls[0]
        yield Diagnostic.of(
            codes.UNKNOWN_VM_SIZE,
            f"step '{node.id}' runs on serverless compute with no instance_type, so the "
            f"service's default VM size runs it, but its code puts work on a GPU whatever is "
            f"there ({call}): nothing declares a GPU for it",
            hint=help_for(node, "pass Compute(sku='Standard_NC...') (a GPU size) to the "
                                "component",
                          "give the job resources.instance_type: Standard_NC... (a GPU size)",
                          "pass instance_type='Standard_NC...' (a GPU size) to command()"),
            severity=Severity.WARNING, **at_code(node, facts, line))


#: A launcher's process count in a command: ``horovodrun -np 8``, ``mpirun -n 8``,
#: ``accelerate launch --num_processes 8``.
_LAUNCHER_COUNT = re.compile(
    r"(?<![\w.-])(?P<launcher>horovodrun|mpirun|mpiexec|accelerate\s+launch)\b[^;&|\n]*?\s"
    r"(?P<flag>-np|-n|--np|--num[_-]processes)[=\s]+(?P<count>\d+)")
_ACCELERATE_FILE = re.compile(r"(?<![\w.-])accelerate\s+launch\b[^;&|\n]*?\s"
                              r"--config[_-]file[=\s]+(?P<file>[^\s;&|]+)")


def _accelerate_config(node: StepNode) -> tuple[str, dict[str, Any]] | None:
    """The accelerate configuration an ``accelerate launch`` in the command names, as (path,
    its settings), when it is there to read (relative to the code folder, else to the
    definition's folder)."""
    c = node.component
    m = _ACCELERATE_FILE.search(c.command or "")
    if m is None or "${{" in m.group("file"):
        return None
    folders = [c.code] if c.code else []
    if c.location is not None:
        folders.append(os.path.dirname(c.location.file))
    import yaml  # PyYAML: a dependency of mlpipe (the Azure ML YAML reader)

    for folder in folders:
        try:
            with open(os.path.join(folder, m.group("file")), encoding="utf-8") as fh:
                data = yaml.safe_load(fh)
        except (OSError, yaml.YAMLError):
            continue
        return (m.group("file"), data) if isinstance(data, dict) else None
    return None


def stated_by_launchers(node: StepNode) -> Iterator[tuple[str, int]]:
    """The world sizes a launcher in the command (``horovodrun -np N``) or the accelerate
    configuration ``accelerate launch`` names (``num_processes``) states: (where, how many
    processes). Each launcher in a command Azure ML launches is MP509 as well."""
    for m in _LAUNCHER_COUNT.finditer(node.component.command or ""):
        launcher = " ".join(m.group("launcher").split())
        yield f"command {launcher!r} {m.group('flag')} {m.group('count')}", int(m.group("count"))
    found = _accelerate_config(node)
    value = found[1].get("num_processes") if found is not None else None
    if found is not None and isinstance(value, int) and not isinstance(value, bool):
        yield f"accelerate configuration {found[0]!r}: num_processes {value}", value
