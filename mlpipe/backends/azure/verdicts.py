"""The pre-flight's verdicts: what the workspace answered, judged against what the job names.

Pure: entities in (azure-ai-ml's ``Compute``, ``VmSize``, ``Usage``, ``Environment``,
``Component``, ``Data``; ``None`` for "not found"), diagnostics out. An environment's contents
are judged from its conda specification only: an image or a build context mlpipe cannot read
is said to be unknown (MP861), never guessed, unless ``mlpipe environment`` built it (its
``mlpipe.runtime`` tag: the builder's word, which the step record of a run confirms).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from mlpipe.backends.azure.lookups import Unchecked, field_of
from mlpipe.backends.azure.runtime_env import RUNTIME_TAG
from mlpipe.codes import (
    ASSET_VERSION_NOT_FOUND,
    COMPUTE_MAX_NODES_TOO_FEW,
    COMPUTE_NOT_FOUND,
    COMPUTE_SIZE_DIFFERS,
    COULD_NOT_CHECK,
    ENVIRONMENT_CONTENTS_UNKNOWN,
    MLFLOW_CLIENT_REJECTED,
    QUOTA_BELOW_DEMAND,
    QUOTA_IN_USE,
    REFERENCE_RESOLVED,
    REGISTERED_ENVIRONMENT_WITHOUT_MLPIPE,
    REGISTRY_ASSET_NOT_CHECKED,
    VM_SIZE_NOT_OFFERED,
)
from mlpipe.diagnostics import Diagnostic
from mlpipe.environments import runtime_line, runtime_listing
from mlpipe.references import asset_reference
from mlpipe.spec import ComponentSpec, StepSpec

#: The first MLflow release the Azure ML tracking server rejected (azureml-examples PR #3888:
#: training with MLflow >= 2.19 failed against it); a client that may resolve to it or later
#: is MP860.
MLFLOW_REJECTED_FROM = "2.19"
_PROBES = ("2.19.0", "2.19.1", "2.20.0", "2.21.3", "2.22.0", "3.0.0", "3.5.0", "99.0")


@dataclass(slots=True)
class Needs:
    """What a pipeline names in the workspace, each with the steps (or inputs) that name it."""

    computes: dict[str, list[tuple[StepSpec, ComponentSpec]]] = field(default_factory=dict)
    serverless: dict[str, list[tuple[StepSpec, ComponentSpec]]] = field(default_factory=dict)
    environments: dict[tuple[str, str | None, str | None], list[tuple[StepSpec, ComponentSpec]]] \
        = field(default_factory=dict)
    components: dict[tuple[str, str | None, str | None], list[tuple[StepSpec, ComponentSpec]]] \
        = field(default_factory=dict)
    data: dict[tuple[str, str | None, str | None], list[str]] = field(default_factory=dict)
    #: Registered models bound to a model input (``mlflow_model``, ``custom_model``, ...),
    #: asked of the model registry, not the data assets.
    models: dict[tuple[str, str | None, str | None], list[str]] = field(default_factory=dict)
    #: Assets in a registry (``azureml://registries/...``), by their reference, with who names
    #: each (a step and its component, or the input's words): not asked of the workspace,
    #: where they do not live (MP862).
    registry: dict[str, list[tuple[str, Any]]] = field(default_factory=dict)


def spelled(key: tuple[str, str | None, str | None]) -> str:
    name, version, label = key
    return f"azureml:{name}:{version}" if version else f"azureml:{name}@{label}"


def _where(step: StepSpec, comp: ComponentSpec) -> dict[str, Any]:
    loc = comp.location
    return {"step": step.name, "file": loc.file if loc else None, "line": loc.line if loc else None}


def _steps(uses: list[tuple[StepSpec, ComponentSpec]]) -> str:
    names = [f"'{s.name}'" for s, _ in uses]
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


#: How to make each kind of missing workspace asset exist.
_REGISTER = {
    "environment": "register it (`az ml environment create --file env.yml`) or name a version "
                   "that exists (`az ml environment list`)",
    "component": "register it (`az ml component create`) or name a version that exists (`az ml "
                 "component list`)",
    "data": "register the data asset version (`az ml data create`), or pass --input "
            "NAME=azureml:NAME:VERSION of one that exists",
    "model": "register the model version (`az ml model create`), or pass --input "
             "NAME=azureml:NAME:VERSION of one that exists (`az ml model list`)",
}


def judge(needs: Needs, found: dict[tuple[str, Any], Any]
          ) -> tuple[list[Diagnostic], dict[str, str]]:
    """The diagnostics of one pre-flight and the references it resolved."""
    out: list[Diagnostic] = []
    resolved: dict[str, str] = {}
    for name, uses in needs.computes.items():
        out += _compute(name, uses, found[("compute", name)])
    if needs.serverless:
        out += _serverless(needs, found[("sizes", None)], found[("usages", None)])
    for kind, needed in (("environment", needs.environments), ("component", needs.components)):
        for key, uses in needed.items():
            asset = found[(kind, key)]
            at = _where(*uses[0])
            if asset is None:
                out.append(_missing(kind, key, f"steps {_steps(uses)}", at, _REGISTER[kind]))
                continue
            out += _resolved(kind, key, asset, resolved, at)
            if kind == "environment":
                out += _contents(key, asset, uses)
    for kind, label, named_by in (("data", "data asset", needs.data),
                                  ("model", "model", needs.models)):
        for key, uses in named_by.items():
            asset = found[(kind, key)]
            if asset is None:
                out.append(_missing(label, key, ", ".join(uses), {}, _REGISTER[kind]))
                continue
            out += _resolved(label, key, asset, resolved, {})
    for text, named in needs.registry.items():
        first = named[0][1]
        out.append(Diagnostic.of(
            REGISTRY_ASSET_NOT_CHECKED,
            f"{text} ({', '.join(s for s, _ in named)}) is a registry asset: not checked, as it "
            f"does not live in the workspace the pre-flight asks",
            hint=f"check it with `{_registry_show(text)}`; Azure ML resolves it when the job is "
                 f"submitted", **(_where(*first) if isinstance(first, tuple) else {})))
    return out, resolved


def _registry_show(text: str) -> str:
    """The ``az ml`` command that shows registry asset ``text``."""
    ref = asset_reference(text)
    if ref is None or ref.registry is None:
        return "az ml environment show --registry-name ..."
    which = f"--version {ref.version}" if ref.version else f"--label {ref.label}"
    kind = "data" if ref.kind == "data" else ref.kind.removesuffix("s")
    return f"az ml {kind} show --registry-name {ref.registry} --name {ref.name} {which}"


def _compute(name: str, uses: list[tuple[StepSpec, ComponentSpec]], compute: Any
             ) -> list[Diagnostic]:
    if compute is None:
        who = f"which steps {_steps(uses)} run on" if uses else "the job's default compute"
        return [Diagnostic.of(
            COMPUTE_NOT_FOUND,
            f"compute {name!r}, {who}, does not exist in the workspace",
            hint=f"create it (`az ml compute create --type amlcompute --name {name} ...`), "
                 f"or name one that exists (`az ml compute list`)",
            **(_where(*uses[0]) if uses else {}))]
    out = []
    size = str(field_of(compute, "size", "vm_size") or "")
    for step, comp in uses:
        declared = comp.compute.sku if comp.compute is not None else None
        if declared and size and declared.lower() != size.lower():
            out.append(Diagnostic.of(
                COMPUTE_SIZE_DIFFERS,
                f"step '{step.name}' declares compute {name!r} as {declared}, but the "
                f"workspace's {name!r} is {size}", hint=f"declare Compute({name!r}, "
                f"sku={size!r}) (the launch checks judge the declared size), or run the step "
                f"on a cluster of {declared}", **_where(step, comp)))
    max_nodes = field_of(compute, "max_instances", "max_node_count")
    if isinstance(max_nodes, int):
        for step, comp in uses:
            if comp.instances > max_nodes:
                out.append(Diagnostic.of(
                    COMPUTE_MAX_NODES_TOO_FEW,
                    f"step '{step.name}' asks for {comp.instances} instances, but compute "
                    f"{name!r} scales to at most {max_nodes} node(s): the job would wait in "
                    f"the queue for nodes it can never get",
                    hint=f"raise the cluster's max nodes (`az ml compute update --name {name} "
                         f"--max-instances {comp.instances}`) or ask for {max_nodes} "
                         f"instance(s)", **_where(step, comp)))
    return out


def _unchecked(what: str, uses: list[tuple[StepSpec, ComponentSpec]], answer: Unchecked,
               so: str) -> Diagnostic:
    step, comp = uses[0]
    return Diagnostic.of(
        COULD_NOT_CHECK,
        f"could not check {what} for steps {_steps(uses)}: the workspace did not answer "
        f"({answer.reason}); {so}", hint="run the check again later, or look it up yourself "
        "(`az ml compute list-sizes`, `az ml compute list-usage`)", **_where(step, comp))


def _serverless(needs: Needs, sizes: Any, usages: Any) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    every = [use for uses in needs.serverless.values() for use in uses]
    if isinstance(sizes, Unchecked):
        # unknown is not absent: no size can be judged offered or not, nor its quota
        return [_unchecked("the region's VM sizes", every, sizes,
                           "whether it offers each size and the quota they need are unknown")]
    if isinstance(usages, Unchecked):
        out.append(_unchecked("the subscription's quota", every, usages,
                              "whether the VM families have room is unknown"))
        usages = []
    offered = {str(field_of(s, "name")).lower(): s for s in sizes or []}
    quota = {}
    for usage in usages or []:
        name = field_of(usage, "name")
        value = name.get("value") if isinstance(name, dict) else field_of(name, "value")
        if value:
            quota[str(value).lower()] = usage
    for sku, uses in needs.serverless.items():
        size = offered.get(sku.lower())
        step, comp = uses[0]
        if size is None:
            out.append(Diagnostic.of(
                VM_SIZE_NOT_OFFERED,
                f"serverless steps {_steps(uses)} ask for VM size {sku}, which the workspace's "
                f"region does not offer", hint="pick a size from `az ml compute list-sizes` "
                "(the region's), or run on a cluster", **_where(step, comp)))
            continue
        family = str(field_of(size, "family") or "")
        vcpus = field_of(size, "v_cp_us", "vCPUs")
        usage = quota.get(family.lower())
        if not isinstance(vcpus, int) or usage is None:
            continue
        limit = field_of(usage, "limit")
        current = field_of(usage, "current_value", "currentValue") or 0
        if not isinstance(limit, int):
            continue
        step, comp = max(uses, key=lambda u: u[1].instances)
        demand = vcpus * comp.instances
        if demand > limit:
            out.append(Diagnostic.of(
                QUOTA_BELOW_DEMAND,
                f"step '{step.name}' needs {demand} vCPUs of {family} ({comp.instances} x "
                f"{sku}, {vcpus} vCPUs each), but the subscription's quota for the family in "
                f"this region is {limit}: the job can never start",
                hint="request more quota for the family (Azure portal: Quotas), or choose a "
                     "smaller size or fewer instances", **_where(step, comp)))
        elif demand > limit - current:
            out.append(Diagnostic.of(
                QUOTA_IN_USE,
                f"step '{step.name}' needs {demand} vCPUs of {family} ({comp.instances} x "
                f"{sku}), and {current} of the family's {limit} are in use now: the job waits "
                f"until {demand - (limit - current)} more are free",
                hint="submit later, or free the family's vCPUs (other jobs, idle clusters with "
                     "min nodes above 0)", **_where(step, comp)))
    return out


def _missing(what: str, key: tuple[str, str | None, str | None], named_by: str,
             where: dict[str, Any], hint: str) -> Diagnostic:
    name, version, label = key
    said = f"version {version}" if version else f"a version labelled {label!r}"
    return Diagnostic.of(ASSET_VERSION_NOT_FOUND,
                         f"{what} {spelled(key)} ({named_by}) does not exist in the workspace: "
                         f"it has no {name!r} with {said}", hint=hint, **where)


def _resolved(what: str, key: tuple[str, str | None, str | None], entity: Any,
              resolved: dict[str, str], where: dict[str, Any]) -> list[Diagnostic]:
    name, version, _ = key
    if version:
        return []
    today = str(field_of(entity, "version") or "?")
    resolved[spelled(key)] = f"azureml:{name}:{today}"
    return [Diagnostic.of(
        REFERENCE_RESOLVED,
        f"{what} {spelled(key)} names version {today} today (recorded with the run); a "
        f"later submission may get another", hint=f"pin it: azureml:{name}:{today}", **where)]


def _contents(key: tuple[str, str | None, str | None], env: Any,
              uses: list[tuple[StepSpec, ComponentSpec]]) -> list[Diagnostic]:
    functions = [(s, c) for s, c in uses if c.function is not None]
    if not functions:
        return []  # a script component's command needs neither mlpipe nor its MLflow
    step, comp = functions[0]
    where = _where(step, comp)
    label = spelled(key)
    conda = field_of(env, "conda_file")
    tags = field_of(env, "tags") or {}
    if isinstance(tags, dict) and tags.get(RUNTIME_TAG) and not isinstance(conda, dict):
        return []  # built by `mlpipe environment`: its tags say the runtime and MLflow pin
    if not isinstance(conda, dict):
        build = field_of(env, "build")
        source = (f"built from a Docker context ({field_of(build, 'path') or 'in the workspace'})"
                  if build is not None else f"image {field_of(env, 'image') or '?'} only")
        return [Diagnostic.of(
            ENVIRONMENT_CONTENTS_UNKNOWN,
            f"environment {label} (steps {_steps(functions)}) is {source}: mlpipe cannot see "
            f"whether it has mlpipe or which MLflow client it holds",
            hint="give the environment a conda file that lists mlpipe (docs/azure.md, \"An "
                 "environment with the mlpipe runtime\"); a step record from a run there "
                 "settles it too", **where)]
    requirements = _requirements(conda)
    out = []
    if not any(_is_mlpipe(r) for r in requirements):
        out.append(Diagnostic.of(
            REGISTERED_ENVIRONMENT_WITHOUT_MLPIPE,
            f"environment {label}, which steps {_steps(functions)} run their bodies in with "
            f"`python -m mlpipe.runtime.step`, has a conda file that lists no mlpipe-aml (mlpipe's "
            f"distribution): the job would fail with 'No module named mlpipe'",
            hint=f"register a version whose conda file installs \"{runtime_line()}\" "
                 f"(docs/azure.md, \"An "
                 "environment with the mlpipe runtime\")", **where))
    out += _mlflow(label, requirements, functions, where)
    return out


def _requirements(conda: dict[str, Any]) -> list[str]:
    found = []
    for dep in conda.get("dependencies") or []:
        if isinstance(dep, str):
            found.append(dep.strip())
        elif isinstance(dep, dict):
            found += [p.strip() for p in dep.get("pip") or [] if isinstance(p, str)]
    return found


def _name(requirement: str) -> str:
    base = requirement.split("::")[-1].strip().lower().replace("_", "-")
    for sep in ("=", "<", ">", "!", "~", "[", " ", "@", ";"):
        base = base.split(sep, 1)[0]
    return base


def _is_mlpipe(requirement: str) -> bool:
    """Whether a requirement installs this project's runtime (``mlpipe-aml``, by name or as
    its wheel); ``mlpipe`` is another project's name on the package index."""
    listing = runtime_listing(requirement)
    return listing is not None and listing[0]


def _mlflow(label: str, requirements: list[str], uses: list[tuple[StepSpec, ComponentSpec]],
            where: dict[str, Any]) -> list[Diagnostic]:
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import Version

    clients = [r for r in requirements if _name(r) in ("mlflow", "mlflow-skinny")]
    if not clients:
        return []  # no MLflow: metrics stay in the step record (docs/azure.md)
    out = []
    for req in clients:
        text = req.split("::")[-1]
        spec = text[len(_name(req)):].split(";", 1)[0].strip()
        if spec.startswith("=") and not spec.startswith("=="):  # conda's "mlflow=2.21"
            spec = "==" + spec[1:].split("=", 1)[0] + ".*"
        try:
            allowed = SpecifierSet(spec.replace(" ", ""))
        except InvalidSpecifier:
            continue
        named = re.findall(r"\d+(?:\.\d+)+", spec)  # a pin is its own probe
        reaching = [v for v in (*named, *_PROBES) if Version(v) >= Version(MLFLOW_REJECTED_FROM)
                    and allowed.contains(v, prereleases=False)]
        if reaching:
            pinned = f"allows MLflow {reaching[0]}" if spec else "leaves MLflow unpinned"
            out.append(Diagnostic.of(
                MLFLOW_CLIENT_REJECTED,
                f"environment {label} (steps {_steps(uses)}) lists {req!r}, which {pinned}: "
                f"the Azure ML tracking server rejected MLflow {MLFLOW_REJECTED_FROM} and later "
                f"(azureml-examples PR #3888), so the steps' metrics would not reach the "
                f"workspace", hint=f"pin the client below it: \"mlflow-skinny<"
                f"{MLFLOW_REJECTED_FROM}\" with azureml-mlflow", **where))
    if not any(_name(r) == "azureml-mlflow" for r in requirements):
        out.append(Diagnostic.of(
            MLFLOW_CLIENT_REJECTED,
            f"environment {label} (steps {_steps(uses)}) lists an MLflow client but not "
            f"azureml-mlflow: MLflow cannot open the workspace's azureml:// tracking URI "
            f"without that plugin, so the steps' metrics would not reach the workspace",
            hint="add azureml-mlflow to the conda file's pip dependencies", **where))
    return out


__all__ = ["MLFLOW_REJECTED_FROM", "Needs", "judge", "spelled"]
