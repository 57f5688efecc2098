"""Running a child job's command as an Azure ML compute node runs it, for tests that need a
step's real outputs, step record and MLflow metrics in the loopback workspace.

What the node does, here: it downloads the component's code snapshot (the blobs azure-ai-ml
uploaded at submission) into a working folder, mounts each input (the files under the data
asset's or the upstream output's datastore path, copied into a folder), gives each output an
empty folder, substitutes ``${{inputs.X}}`` / ``${{outputs.X}}`` in the component's command
(parameters by value, their defaults where the node binds none; a ``$[[...]]`` part dropped
unless every reference in it has a value), and runs the command in the code folder with the
variables Azure ML sets (``AZUREML_RUN_ID``, ``MLFLOW_TRACKING_URI`` pointing at the
workspace's MLflow, ``MLFLOW_RUN_ID`` = the job's name, a token for it). Its outputs are then
uploaded to the job's output locations in the datastore, and the job completes or fails with
the status message Azure ML gives a non-zero exit.

The interpreter is the caller's (``python`` in the command becomes ``sys.executable``), which
stands in for the environment's image. Independent of mlpipe: it reads only what the client
sent the service.
"""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

from loopback.azureml.jobs import Job

_REF = re.compile(r"\$\{\{\s*(inputs|outputs)\.([A-Za-z0-9_]+)\s*\}\}")
_PARENT = re.compile(r"^\$\{\{\s*parent\.(inputs|outputs)\.([A-Za-z0-9_]+)\s*\}\}$")
_SIBLING = re.compile(r"^\$\{\{\s*parent\.jobs\.([A-Za-z0-9_]+)\.outputs\.([A-Za-z0-9_]+)\s*\}\}$")


class NodeFailed(Exception):
    """The job's inputs cannot be resolved the way the service would (a test's setup error)."""


def _last(arm_id: str) -> list[str]:
    return arm_id.removeprefix("azureml:").rstrip("/").split("/")


def _files(svc: Any, uri: str) -> dict[str, bytes]:
    found = svc.datastore_files(uri)
    if not found and "/paths/" in uri:  # a single file, named by its own path
        blob = uri.split("/paths/", 1)[1]
        data = svc.blobs.get((svc.container, blob))
        if data is not None:
            found = {blob.rsplit("/", 1)[-1]: data}
    return found


def _write(folder: Path, files: dict[str, bytes]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for rel, data in files.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_bytes(data)


def _code(svc: Any, code: str | None, folder: Path) -> Path:
    """The code snapshot the component names, downloaded into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    if not code:
        return folder
    parts = _last(code)
    asset = svc.assets.get(("codes", parts[-3], parts[-1]))
    if asset is None:
        raise NodeFailed(f"code {code} is not registered in the loopback workspace")
    uri = (asset.body.get("properties") or {}).get("codeUri") or ""
    prefix = uri.split(f"/{svc.container}/", 1)[-1].rstrip("/") + "/"
    for (container, blob), data in list(svc.blobs.items()):
        if container == svc.container and blob.startswith(prefix):
            (folder / blob[len(prefix):]).parent.mkdir(parents=True, exist_ok=True)
            (folder / blob[len(prefix):]).write_bytes(data)
    return folder


def _data_uri(svc: Any, arm_id: str) -> str:
    """A data asset's files: ``.../data/NAME/versions/V`` -> its datastore path."""
    parts = _last(arm_id)
    if "data" in parts:
        at = parts.index("data")
        return f"azureml://datastores/workspaceblobstore/paths/data/{parts[at + 1]}/{parts[-1]}/"
    return arm_id


def _binding(job: Job, name: str) -> Any:
    """What ``job`` binds input ``name`` to, resolved through its parents: ``("uri", URI)`` for
    data (a data asset, an upstream job's output) or ``("value", TEXT)`` for a parameter; None
    when nothing is bound."""
    parent = job.parent
    if parent is None:  # the pipeline job's own inputs
        given = job.definition.get("inputs", {}).get(name) or {}
        if "uri" in given:
            return "uri", _data_uri(job.service, str(given["uri"]))
        return ("value", str(given["value"])) if "value" in given else None
    node = (parent.nodes().get(job.node or "") or {})
    given = (node.get("inputs") or {}).get(name)
    if given is None:
        return None
    value = str(given.get("value") if isinstance(given, dict) else given)
    up = _PARENT.match(value)
    if up and up.group(1) == "inputs":
        return _binding(parent, up.group(2))
    sibling = _SIBLING.match(value)
    if sibling:
        return "uri", _output_uri(parent.child(sibling.group(1)), sibling.group(2))
    if isinstance(given, dict) and given.get("uri"):
        return "uri", str(given["uri"])
    return "value", value


def _output_uri(job: Job, port: str) -> str:
    """Where ``job``'s output ``port`` is (through a nested pipeline to the node that wrote it)."""
    if job.kind == "SubGraph":
        for node, definition in job.nodes().items():
            for inner, bound in (definition.get("outputs") or {}).items():
                value = str(bound.get("value") if isinstance(bound, dict) else bound)
                found = _PARENT.match(value)
                if found and found.groups() == ("outputs", port):
                    return _output_uri(job.child(node), inner)
        raise NodeFailed(f"nested pipeline {job.node} has no node writing its output {port!r}")
    out = job.outputs.get(port)
    if out is None or not out.uri:
        raise NodeFailed(f"job {job.node} ({job.status}) has no output {port!r} yet")
    return out.uri


def _render(command: str, values: dict[str, str]) -> str:
    def optional(match: re.Match[str]) -> str:
        inner = match.group(1)
        refs = [f"{k}.{n}" for k, n in _REF.findall(inner)]
        return inner if all(r in values for r in refs) else ""

    command = re.sub(r"\$\[\[(.*?)\]\]", optional, command)
    return _REF.sub(lambda m: values[f"{m.group(1)}.{m.group(2)}"], command)


def run_node(job: Job, folder: str | os.PathLike[str], *, env: dict[str, str] | None = None,
             timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """Run child job ``job``'s command as its compute node would (see the module docstring),
    in ``folder/<job name>``; the job ends ``Completed`` or ``Failed``.

    Returns:
        The finished process (its ``stderr`` is the job's log).

    Raises:
        NodeFailed: an input is bound to nothing the service could resolve.
    """
    svc = job.service
    spec = job.definition.get("componentSpec") or {}
    work = Path(folder) / job.name
    code = _code(svc, spec.get("code"), work / "code")
    values: dict[str, str] = {}
    for name, declared in (spec.get("inputs") or {}).items():
        bound = _binding(job, name)
        if bound is None and (declared or {}).get("default") is not None:
            bound = ("value", str(declared["default"]))
        if bound is None:
            continue
        kind, value = bound
        if kind == "uri":
            mount = work / "inputs" / name
            files = _files(svc, value)
            if (declared or {}).get("type") == "uri_file" and len(files) == 1:
                _write(mount, files)
                values[f"inputs.{name}"] = str(mount / next(iter(files)))
            else:
                _write(mount, files)
                values[f"inputs.{name}"] = str(mount)
        else:
            values[f"inputs.{name}"] = value
    outputs: dict[str, Path] = {}
    for port, declared in (spec.get("outputs") or {}).items():
        mount = work / "outputs" / port
        mount.mkdir(parents=True, exist_ok=True)
        outputs[port] = mount
        is_file = (declared or {}).get("type") == "uri_file"
        values[f"outputs.{port}"] = str(mount / port if is_file else mount)
    argv = shlex.split(_render(spec["command"], values))
    if argv and argv[0] in ("python", "python3"):
        argv[0] = sys.executable
    from loopback.azureml.credential import make_token

    token, _ = make_token("https://ml.azure.com")
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "MLPIPE_"))}
    environ.update({"AZUREML_RUN_ID": job.name, "AZUREML_ARM_WORKSPACE_NAME": svc.workspace_name,
                    "AZUREML_ARM_SUBSCRIPTION": svc.subscription_id,
                    "AZUREML_ARM_RESOURCEGROUP": svc.resource_group,
                    "MLFLOW_TRACKING_URI": svc.mlflow_https_uri, "MLFLOW_RUN_ID": job.name,
                    "MLFLOW_TRACKING_TOKEN": token, "PYTHONUNBUFFERED": "1",
                    **(env or {})})
    job.start()
    done = subprocess.run(argv, cwd=code, env=environ, capture_output=True, text=True,
                          timeout=timeout)
    for port, mount in outputs.items():
        files = {p.relative_to(mount).as_posix(): p.read_bytes()
                 for p in mount.rglob("*") if p.is_file()}
        job.set_output(port, files=files)
    job.log_artifact("user_logs/std_log.txt", done.stdout + done.stderr)
    if done.returncode == 0:
        job.complete()
    else:
        last = next((line for line in reversed(done.stderr.splitlines()) if line.strip()), "")
        job.fail(f"UserError: Execution failed. User process '{Path(argv[0]).name}' exited with "
                 f"status code {done.returncode}. Please check log file 'user_logs/std_log.txt' "
                 f"for error details. Error: {last}")
    return done
