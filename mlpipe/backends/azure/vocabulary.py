"""The Azure ML CLI v2 vocabulary, both ways: mlpipe's spec values <-> YAML fragments.

Plain dicts only; nothing here imports azure-ai-ml or judges a pipeline.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from mlpipe.artifacts import AssetType
from mlpipe.backends.azure.jobkinds import KINDS
from mlpipe.distribution import LIBRARIES, Distribution, Mpi, NotAJobType, PyTorch, TensorFlow
from mlpipe.params import azure_value  # noqa: F401  (re-exported: the YAML reader's)
from mlpipe.references import environment_text
from mlpipe.spec import Compute, Environment, ParamSpec, ParamType

COMPONENT_SCHEMA = "https://azuremlschemas.azureedge.net/latest/commandComponent.schema.json"
PIPELINE_COMPONENT_SCHEMA = ("https://azuremlschemas.azureedge.net/latest/"
                             "pipelineComponent.schema.json")
PIPELINE_JOB_SCHEMA = "https://azuremlschemas.azureedge.net/latest/pipelineJob.schema.json"

#: mlpipe parameter type -> Azure ML input type.
PARAM_TYPES: dict[ParamType, str] = {
    ParamType.INT: "integer",
    ParamType.FLOAT: "number",
    ParamType.STR: "string",
    ParamType.BOOL: "boolean",
    ParamType.ENUM: "string",
}
#: Azure ML input type -> mlpipe parameter type (an enum list turns ``string`` into choices).
AZURE_PARAM_TYPES: dict[str, ParamType] = {
    "integer": ParamType.INT,
    "number": ParamType.FLOAT,
    "string": ParamType.STR,
    "boolean": ParamType.BOOL,
}
ASSET_TYPES = {k.value: k for k in AssetType}
#: The parameter type of a literal value written in YAML.
LITERAL_PARAM_TYPES: dict[type, ParamType] = {bool: ParamType.BOOL, int: ParamType.INT,
                                              float: ParamType.FLOAT, str: ParamType.STR}

#: Azure ML job (node) types, as a note names them. ``command`` and ``pipeline`` run here
#: too; the others run only on Azure ML (mlpipe checks their wiring and exports them).
#: How messages name each job kind (``jobkinds.KINDS`` is the table: this is its face).
JOB_KINDS: dict[str, str] = {name: kind.display for name, kind in KINDS.items()}
CONTROL_FLOW = tuple(name for name, kind in KINDS.items() if kind.control_flow)
#: The standalone job kinds a job file can hold besides a pipeline (``type:`` at its top).
STANDALONE_KINDS = tuple(name for name, kind in KINDS.items() if kind.standalone)


def job_kind(doc: Any) -> str | None:
    """The kind of job a job file holds, as Azure ML's CLI reads it: its ``type:`` (any case;
    ``type_spelling`` says whether azure-ai-ml accepts the spelling), ``pipeline`` for a file
    with ``jobs:`` and no type, and ``command`` — the CLI's default — for any other file
    without one. The one test the importer and the export share.

    Example:
        >>> job_kind({"command": "python train.py"})
        'command'
    """
    if not isinstance(doc, Mapping):
        return None
    kind = doc.get("type")
    if kind is None:
        return "pipeline" if "jobs" in doc else "command"
    return str(kind).lower()


def prompt_flow(doc: Any, name: str) -> str | None:
    """What prompt-flow file ``doc`` (named ``name``) is — ``"a prompt flow"`` (a
    ``flow.dag.yaml``: nodes, no command) or ``"a prompt flow run"`` (a ``run.yml``: a
    ``flow:`` to run over ``data:``) — or None for an Azure ML job or component."""
    if not isinstance(doc, Mapping) or "command" in doc or "jobs" in doc:
        return None
    if name.lower().startswith("flow.dag.") or (isinstance(doc.get("nodes"), list)
                                                and "type" not in doc):
        return "a prompt flow"
    if "flow" in doc and ("data" in doc or "column_mapping" in doc
                          or "Run.schema" in str(doc.get("$schema", ""))):
        return "a prompt flow run"
    return None


def type_spelling(doc: Any) -> str | None:
    """What is wrong with how a job file spells its ``type:``, or None: azure-ai-ml's
    ``load_job`` compares it exactly (``Command`` is "Unsupported job type")."""
    kind = doc.get("type") if isinstance(doc, Mapping) else None
    if isinstance(kind, str) and kind != kind.lower() and kind.lower() in JOB_KINDS:
        return (f"type: {kind} is not how azure-ai-ml spells the {kind.lower()} job type: "
                f"its load_job compares the text exactly and refuses it as \"Unsupported job "
                f"type: {kind}\"")
    return None

_ENV_REF = re.compile(r"^azureml:(?P<name>[^:@/][^:@]*)"
                      r"(?::(?P<version>[^@]+)|@(?P<label>[\w.-]+))?$")
_ENV_URI = re.compile(r"^(?P<base>azureml://.+/environments/[^/]+)"
                      r"(?:/versions/(?P<version>[^/]+)|/labels/(?P<label>[^/]+))?$")
_COMPUTE_REF = re.compile(r"^azureml:(?P<name>.+)$")


def param_input(spec: ParamSpec) -> dict[str, Any]:
    """The ``inputs.NAME`` entry of a component for a parameter.

    Example:
        >>> param_input(ParamSpec("epochs", ParamType.INT, False, 10, 1, 200))
        {'type': 'integer', 'default': 10, 'min': 1, 'max': 200}
    """
    out: dict[str, Any] = {"type": PARAM_TYPES[spec.type]}
    if not spec.required:
        if spec.default is None:
            out["optional"] = True
        else:
            out["default"] = str(spec.default) if spec.type is ParamType.ENUM else spec.default
    if spec.minimum is not None:
        out["min"] = spec.minimum
    if spec.maximum is not None:
        out["max"] = spec.maximum
    if spec.choices is not None and out["type"] == "string":
        out["enum"] = [str(c) for c in spec.choices]
    description = spec.description or ""
    if spec.choices is not None and out["type"] != "string":
        # Azure ML has no enum for numbers: the choices travel in the text, the runtime checks them.
        description = f"{description} (one of {', '.join(map(str, spec.choices))})".strip()
    if description:
        out["description"] = description
    return out


def environment_ref(env: Environment) -> str | dict[str, Any]:
    """``azureml:name:version`` (or ``@latest``) for a registered environment; an inline
    ``{image, conda_file}`` definition when the environment names an image."""
    if env.image is None and env.conda_file is None:
        return environment_text(env)
    out: dict[str, Any] = {}
    if env.name:
        out["name"] = env.name
    if env.version:
        out["version"] = env.version
    if env.image:
        out["image"] = env.image
    if env.conda_file:
        out["conda_file"] = env.conda_file
    return out


def parse_environment(value: Any) -> Environment | None:
    """An Environment from a component's ``environment`` field; None when it is no form Azure
    ML reads. A registered one (``azureml:name:version``, ``azureml:name@label``, an
    ``azureml://registries/.../environments/NAME/versions/V`` or ``.../labels/L`` URI, an ARM
    id) keeps its reference as the name; an inline one (``image``, ``conda_file``, ``build``)
    its image and conda file path (an inline conda mapping is left in the document). A label
    (``@latest``, ``/labels/latest``) is kept as the version ``@LABEL``."""
    if isinstance(value, str):
        m = _ENV_REF.match(value)
        if m is not None:
            return Environment(m["name"], version=m["version"] or (
                f"@{m['label']}" if m["label"] else None))
        m = _ENV_URI.match(value)
        if m is not None:
            return Environment(m["base"], version=m["version"] or (
                f"@{m['label']}" if m["label"] else None))
        if value.startswith("azureml:"):
            return Environment(value)
        return None
    if isinstance(value, dict) and any(k in value for k in ("image", "conda_file", "build")):
        conda = value.get("conda_file")
        return Environment(str(value.get("name") or ""),
                           version=None if value.get("version") is None else str(value["version"]),
                           image=value.get("image"),
                           conda_file=conda if isinstance(conda, str) else None)
    return None


def compute_ref(compute: Compute | None) -> str | None:
    """``azureml:NAME`` or None (serverless)."""
    return None if compute is None or compute.name is None else f"azureml:{compute.name}"


def parse_compute(value: Any) -> Compute | None:
    if not isinstance(value, str) or not value:
        return None
    m = _COMPUTE_REF.match(value)
    return Compute(m["name"] if m else value)


def distribution_block(dist: Distribution) -> dict[str, Any]:
    """The ``distribution`` block azure-ai-ml reads for ``dist``."""
    if isinstance(dist, TensorFlow):
        out: dict[str, Any] = {"type": "tensorflow"}
        if dist.workers is not None:
            out["worker_count"] = dist.workers
        if dist.parameter_servers:
            out["parameter_server_count"] = dist.parameter_servers
        return out
    out = {"type": dist.type}
    if dist.processes_per_node is not None:  # type: ignore[attr-defined]
        out["process_count_per_instance"] = dist.processes_per_node  # type: ignore[attr-defined]
    return out


#: The fields azure-ai-ml's schema gives each distribution type (a job refuses any other).
DISTRIBUTION_FIELDS = {"pytorch": ("process_count_per_instance",),
                       "mpi": ("process_count_per_instance",),
                       "tensorflow": ("worker_count", "parameter_server_count")}


def parse_distribution(value: Any, *, job: bool = False) -> Distribution | str:
    """A Distribution from a ``distribution`` block, or the text of what is wrong with it.

    A library named as the type (``deepspeed``, ``horovod``, ``fsdp``) becomes
    ``NotAJobType``, which check MP510 reports. On a job (``job=True``) a field the type does
    not have is wrong, as azure-ai-ml's job schema says; a component's extra fields stay in
    the document, as Azure ML keeps them."""
    if not isinstance(value, dict):
        return f"is {value!r}, not a mapping with a type"
    kind = value.get("type")
    # azure-ai-ml lower-cases a distribution's type before it compares it (``Pytorch``)
    kind = kind.lower() if isinstance(kind, str) else kind
    if isinstance(kind, str) and kind not in DISTRIBUTION_FIELDS and kind != "ray" and (
            kind in LIBRARIES or any(lib in kind for lib in LIBRARIES)):
        return NotAJobType(requested=value["type"])
    if job and kind in DISTRIBUTION_FIELDS:
        extra = sorted(str(k) for k in value if k != "type" and k not in DISTRIBUTION_FIELDS[kind])
        if extra:
            return (f"has field(s) {', '.join(repr(e) for e in extra)}, which a {kind} "
                    f"distribution does not have (azure-ai-ml refuses the job); its fields are "
                    f"type and {' and '.join(DISTRIBUTION_FIELDS[kind])}")
    try:
        if kind == "pytorch":
            return PyTorch(value.get("process_count_per_instance"))
        if kind == "mpi":
            return Mpi(value.get("process_count_per_instance"))
        if kind == "tensorflow":
            return TensorFlow(value.get("worker_count"), value.get("parameter_server_count") or 0)
    except (TypeError, ValueError) as exc:
        return str(exc)
    return f"has type {kind!r}; mlpipe reads pytorch, tensorflow and mpi"


# --- the launch declaration in tags (writer policy, metric aggregation, backend) ------------

WRITERS_TAG, METRICS_TAG, BACKEND_TAG = "mlpipe.writers", "mlpipe.metrics.", "mlpipe.backend"
#: The record output: every rank writes its own part, so its policy is always ``sharded``.
_RECORD_WRITERS = ("mlpipe_record", "sharded")


def launch_tags(dist: Distribution | None, *, record: bool = False) -> dict[str, str]:
    """The component tags that carry what CLI v2 YAML has no field for: the writer policy of
    each output (``mlpipe.writers.NAME`` — ``mlpipe.writers`` for every output), the
    aggregation of each metric (``mlpipe.metrics.NAME``) and the collective backend
    (``mlpipe.backend``). Values are text: ``rank0``, ``sharded``, a rank number; ``mean``,
    ``sum``, ``min``, ``max``, ``rank0``, ``partial``, ``global``; ``nccl``, ``gloo``, ``mpi``.

    Example:
        >>> launch_tags(PyTorch(4, writers={"model": "rank0"}, metrics={"loss": "mean"}))
        {'mlpipe.writers.model': 'rank0', 'mlpipe.metrics.loss': 'mean'}
    """
    if dist is None or not hasattr(dist, "writers"):
        return {}
    tags: dict[str, str] = {}
    for name, policy in getattr(dist, "writers", ()):
        tags[WRITERS_TAG if name == "*" else f"{WRITERS_TAG}.{name}"] = str(policy)
    for name, metric in getattr(dist, "metrics", ()):
        tags[f"{METRICS_TAG}{name}"] = (metric.reduce or metric.scope)
    if backend := getattr(dist, "backend", None):
        tags[BACKEND_TAG] = backend
    if record:
        tags[f"{WRITERS_TAG}.{_RECORD_WRITERS[0]}"] = _RECORD_WRITERS[1]
    return tags


def read_launch_tags(dist: Distribution, tags: Any) -> Distribution | str:
    """``dist`` with the writer policies, metric aggregations and backend its tags declare
    (see :func:`launch_tags`); the text of what is wrong with a tag otherwise."""
    import dataclasses

    if not isinstance(tags, dict):
        return dist
    writers = dict(getattr(dist, "writers", ()))
    metrics = dict(getattr(dist, "metrics", ()))
    changes: dict[str, Any] = {}
    for key, value in tags.items():
        key, text = str(key), str(value).strip()
        if key == WRITERS_TAG or key.startswith(WRITERS_TAG + "."):
            name = "*" if key == WRITERS_TAG else key[len(WRITERS_TAG) + 1:]
            writers[name] = int(text) if text.isdigit() else text
        elif key.startswith(METRICS_TAG):
            metrics[key[len(METRICS_TAG):]] = text
        elif key == BACKEND_TAG:
            if not hasattr(dist, "backend"):
                return f"tag {key!r} declares a backend, which only a pytorch distribution has"
            changes["backend"] = text
    if not hasattr(dist, "writers"):
        return dist
    try:
        return dataclasses.replace(dist, writers=writers, metrics=metrics, **changes)
    except (TypeError, ValueError) as exc:
        return f"tags declare {exc}"
