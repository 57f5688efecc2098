"""The documents of an export from specs: one command or pipeline component file per distinct
spec (named by its digest), and the job node of each step.

Builds plain dicts; writes no file (``Export.write`` does) and never imports azure-ai-ml.
"""
from __future__ import annotations

import os
import posixpath
import re
import sys
from pathlib import Path
from typing import Any

from mlpipe.backends.azure import upload, vocabulary, writeback
from mlpipe.backends.azure.command import RECORD_PORT, RUNTIME_MODULE, runtime_command
from mlpipe.backends.azure.job_inputs import declared_input, node_input, output_kind
from mlpipe.contracts.base import contract_label, contract_spec
from mlpipe.digests import canonical_json
from mlpipe.errors import ExportError
from mlpipe.paths import lexical, rebased
from mlpipe.spec import ComponentSpec, PipelineSpec, PortSpec, StepOutput, StepSpec

COMPONENT_DIR = "components"
PIPELINE_FILE = "pipeline.yml"
RUNTIME_NOTE = (f"Runs its Python body with `python -m {RUNTIME_MODULE}`: the environment must "
                f"have mlpipe installed.")


class Documents:
    """The documents of one export as they are built: component files by digest (one per
    distinct spec), the environments and code uploads they name."""

    def __init__(self, out_dir: Path, code_root: Path | None) -> None:
        self.out_dir = out_dir
        self.code_root = code_root
        self.files: dict[str, dict[str, Any]] = {}
        self.by_digest: dict[str, str] = {}
        self.environments: set[str] = set()
        self.unversioned: set[str] = set()
        self.uploads: dict[Path, upload.Upload] = {}

    def component_file(self, spec: ComponentSpec | PipelineSpec) -> str:
        rel = self.by_digest.get(spec.digest)
        if rel is not None:
            return rel
        base = _component_name(spec)
        rel = f"{COMPONENT_DIR}/{base}.yml"
        if rel in self.files:
            rel = f"{COMPONENT_DIR}/{base}-{_safe(spec.version or '1')}.yml"
        if rel in self.files:
            rel = f"{COMPONENT_DIR}/{base}-{spec.digest[7:19]}.yml"
        self.by_digest[spec.digest] = rel
        self.files[rel] = {}  # reserve the name before recursing into a nested pipeline
        if isinstance(spec, ComponentSpec) and spec.origin is not None:
            self.files[rel] = self.component_as_read(spec, rel)
        else:
            self.files[rel] = (self.command_component(spec, rel)
                               if isinstance(spec, ComponentSpec)
                               else self.pipeline_component(spec, rel))
        return rel

    def component_as_read(self, spec: ComponentSpec, rel: str) -> dict[str, Any]:
        """A component loaded from YAML: its document as written (paths rebased), with
        mlpipe's tags added (its digest, and the contracts attached to its ports)."""
        doc = writeback.component_written_back(spec, self.out_dir, rel)
        doc["tags"] = {**(doc.get("tags") or {}), **_component_tags(spec)}
        return doc

    def command_component(self, spec: ComponentSpec, rel: str) -> dict[str, Any]:
        doc: dict[str, Any] = {"$schema": vocabulary.COMPONENT_SCHEMA, "type": "command",
                               "name": spec.name, "version": spec.version}
        if spec.display_name:
            doc["display_name"] = spec.display_name
        description = _component_description(spec)
        if description:
            doc["description"] = description
        doc["tags"] = _component_tags(spec)
        doc["is_deterministic"] = spec.reuse
        inputs = {p.name: _port_entry(p) for p in spec.inputs}
        inputs.update({p.name: vocabulary.param_input(p) for p in spec.params})
        if inputs:
            doc["inputs"] = inputs
        if spec.outputs:
            doc["outputs"] = {p.name: _port_entry(p) for p in spec.outputs}
        if spec.function is not None:
            if spec.output(RECORD_PORT) is not None or spec.input(RECORD_PORT) is not None:
                raise ExportError(f"component {spec.name!r} has a port named {RECORD_PORT!r}, "
                                  f"which the export reserves for the step record",
                                  hint="rename the port", **where(spec))
            doc.setdefault("outputs", {})[RECORD_PORT] = {
                "type": "uri_folder",
                "description": "mlpipe's step record: validation, metrics, coordination, "
                               "output digests (docs/step-record.md)"}
        code = self.code_of(spec, rel)
        if code is not None:
            doc["code"] = code
        if spec.environment is None:
            raise ExportError(f"component {spec.name!r} has no environment; Azure ML runs every "
                              f"command component in one",
                              hint='pass environment=Environment("name", version="1") to '
                                   '@component (an environment with mlpipe installed)',
                              **where(spec))
        env = vocabulary.environment_ref(spec.environment)
        if isinstance(env, dict) and env.get("conda_file"):
            env = {**env, "conda_file": self.relative(self.resolve(spec, env["conda_file"]), rel)}
        doc["environment"] = env
        if isinstance(env, str) and env.endswith("@latest"):
            self.unversioned.add(spec.environment.name)
        if spec.function is not None:
            label = env if isinstance(env, str) else env.get("name") or env.get("image")
            self.environments.add(str(label))
        if spec.instances != 1:
            doc["resources"] = {"instance_count": spec.instances}
        if spec.distribution is not None:
            doc["distribution"] = vocabulary.distribution_block(spec.distribution)
        doc["command"] = spec.command if spec.command is not None else runtime_command(spec)
        return doc

    def pipeline_component(self, spec: PipelineSpec, rel: str) -> dict[str, Any]:
        doc: dict[str, Any] = {"$schema": vocabulary.PIPELINE_COMPONENT_SCHEMA, "type": "pipeline",
                               "name": _component_name(spec), "version": spec.version or "1",
                               "display_name": spec.name}
        if spec.description:
            doc["description"] = spec.description
        doc["tags"] = {"mlpipe.digest": spec.digest}
        inputs = {}
        for inp in spec.inputs:
            entry = declared_input(spec, inp)
            if entry is not None:
                inputs[inp.name] = entry
        if inputs:
            doc["inputs"] = inputs
        if spec.outputs:
            doc["outputs"] = {name: {"type": output_kind(spec, b).value}
                              for name, b in spec.outputs}
        doc["jobs"] = self.jobs(spec, default_compute=None, declared=set(inputs), here=rel)
        return doc

    def jobs(self, spec: PipelineSpec, default_compute: str | None,
             declared: set[str], here: str = PIPELINE_FILE) -> dict[str, Any]:
        bound_outputs: dict[tuple[str, str], str] = {}
        for name, binding in spec.outputs:
            if not isinstance(binding, StepOutput) or spec.step(binding.step) is None:
                raise ExportError(f"pipeline {spec.name!r} output {name!r} is bound to "
                                  f"{binding}, which Azure ML cannot express as a job output",
                                  hint="return an output of one of the pipeline's steps "
                                       "(run `mlpipe check` for details)", **where(spec))
            key = (binding.step, binding.port)
            if key in bound_outputs:
                raise ExportError(f"pipeline {spec.name!r} returns '{binding}' as both "
                                  f"{bound_outputs[key]!r} and {name!r}; Azure ML binds one step "
                                  f"output to one pipeline output",
                                  hint="return it once", **where(spec))
            bound_outputs[key] = name
        names = [s.name for s in spec.steps]
        if len(set(names)) != len(names):
            twice = next(n for n in names if names.count(n) > 1)
            raise ExportError(f"pipeline {spec.name!r} has two steps named {twice!r}; Azure ML "
                              f"job names are unique", hint="name each step with .named(...)",
                              **where(spec))
        return {step.name: self.node(step, bound_outputs, default_compute, declared, here)
                for step in spec.steps}

    def node(self, step: StepSpec, bound_outputs: dict[tuple[str, str], str],
             default_compute: str | None, declared: set[str], here: str) -> dict[str, Any]:
        target = step.target
        rel = self.component_file(target)
        ref = posixpath.relpath(rel, posixpath.dirname(here) or ".")
        node: dict[str, Any] = {"type": target.kind if isinstance(target, ComponentSpec)
                                else "pipeline", "component": f"./{ref}"}
        if isinstance(target, ComponentSpec):
            # azure-ai-ml spells serverless bare as the default and prefixed on a job
            compute = vocabulary.compute_ref(target.compute) or ("azureml:serverless"
                                                             if default_compute else None)
            if compute is not None and compute.removeprefix("azureml:") != \
                    (default_compute or "").removeprefix("azureml:"):
                node["compute"] = compute
            variables = dict(target.environment.variables if target.environment else ())
            variables.update(target.environment_variables)
            if variables:
                node["environment_variables"] = variables
        inputs = {}
        for key, binding in step.bindings:
            value = node_input(target, key, binding, declared)
            if value is not None:
                inputs[key] = value
        if inputs:
            node["inputs"] = inputs
        outputs = {port: f"${{{{parent.outputs.{name}}}}}"
                   for (s, port), name in bound_outputs.items() if s == step.name}
        if outputs:
            node["outputs"] = outputs
        return node

    def code_of(self, spec: ComponentSpec, rel: str) -> str | None:
        if spec.function is None:
            if spec.code is None:
                return None
            if re.match(r"^[a-z][a-z0-9+.-]*:", spec.code):  # azureml:, https:, git+...
                return spec.code
            return self.relative(Path(spec.code), rel)
        root = self.code_root or module_root(spec)
        if root is None:
            raise ExportError(f"cannot tell which folder holds the code of component "
                              f"{spec.name!r} ({spec.function})",
                              hint="pass code_root= (mlpipe compile --code-root DIR)",
                              **where(spec))
        upload.add_component(self.uploads, root, spec)
        return self.relative(root, rel)

    def relative(self, path: Path, rel: str) -> str:
        return Path(rebased(path, lexical(self.out_dir / rel).parent)).as_posix()

    @staticmethod
    def resolve(spec: ComponentSpec, path: str) -> Path:
        if os.path.isabs(path) or spec.location is None:
            return Path(path)
        return lexical(spec.location.file).parent / path



def where(spec: ComponentSpec | PipelineSpec) -> dict[str, Any]:
    """The ``file=`` and ``line=`` of an error or diagnostic about ``spec``."""
    loc = spec.location
    return {"file": loc.file if loc else None, "line": loc.line if loc else None}



def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", text)


def _component_name(spec: ComponentSpec | PipelineSpec) -> str:
    if isinstance(spec, ComponentSpec):
        return spec.name
    name = re.sub(r"[^a-z0-9_]", "_", spec.name.lower())
    return name if name[:1].isalpha() else f"p_{name}"


def module_root(spec: ComponentSpec) -> Path | None:
    """The folder a function component's module was imported from (its package's parent)."""
    module_name = (spec.function or "").partition(":")[0]
    module = sys.modules.get(module_name)
    file = getattr(module, "__file__", None)
    if not file:
        return None
    root = lexical(file).parent
    for _ in range(module_name.count(".")):
        root = root.parent
    return root


def _port_entry(port: PortSpec) -> dict[str, Any]:
    entry: dict[str, Any] = {"type": port.kind.value}
    if port.optional:
        entry["optional"] = True
    description = port.description or ""
    if port.contract is not None:
        description = f"{description} [contract {contract_label(port.contract)}]".strip()
    if description:
        entry["description"] = description
    return entry


def _component_description(spec: ComponentSpec) -> str:
    parts = [spec.description or (spec.doc or "").split("\n", 1)[0]]
    contracts = [f"{p.name}={contract_label(p.contract)}" for p in (*spec.inputs, *spec.outputs)
                 if p.contract is not None]
    if contracts:
        parts.append(f"Contracts: {', '.join(contracts)}.")
    if spec.function is not None:
        parts.append(RUNTIME_NOTE)
    return " ".join(p for p in parts if p)


def _component_tags(spec: ComponentSpec) -> dict[str, str]:
    tags = {"mlpipe.digest": spec.digest, "mlpipe.code_digest": spec.code_digest}
    if spec.function is not None:
        tags["mlpipe.function"] = spec.function
        tags["mlpipe.runtime"] = f"python -m {RUNTIME_MODULE} (environment must have mlpipe)"
    for port in (*spec.inputs, *spec.outputs):
        if port.contract is not None:
            tags[f"mlpipe.contract.{port.name}"] = canonical_json(contract_spec(port.contract))
    tags.update(vocabulary.launch_tags(spec.distribution, record=spec.function is not None))
    return tags

