"""The loopback service's wire: an HTTPS server on 127.0.0.1 and its routes.

One host answers what azure-ai-ml reaches on several in Azure: ARM's cloud metadata, the Azure
ML management API (workspace, datastores, codes, components, environments, computes, data,
models, jobs), the workspace discovery document, run history, the workspace's MLflow REST API
and the subset of the Blob service that uploading a code snapshot or a model uses. Faults a
test asked for are answered first; every request is logged in ``service.requests``.
"""
from __future__ import annotations

import base64
import json
import re
import ssl
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

from loopback.azureml import payloads
from loopback.azureml.jobs import Job

WS = (r"/subscriptions/(?P<sub>[^/]+)/resource[gG]roups/(?P<rg>[^/]+)/providers/"
      r"Microsoft\.MachineLearningServices/workspaces/(?P<ws>[^/]+)")
DEFAULT_ERRORS = {
    400: ("BadRequest", "The request is invalid."),
    401: ("InvalidAuthenticationToken", "The access token is invalid or has expired."),
    403: ("AuthorizationFailed", "The client does not have authorization to perform this "
                                 "action."),
    404: ("ResourceNotFound", "The resource was not found."),
    409: ("Conflict", "The request conflicts with the current state of the resource."),
    429: ("TooManyRequests", "The request was throttled; retry after the given time."),
    500: ("InternalServerError", "The service encountered an internal error."),
    503: ("ServiceUnavailable", "The service is temporarily unavailable."),
}


class Answer(Exception):
    """Raised by a route to answer with an error status and an ARM error body."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def not_found(what: str) -> Answer:
    return Answer(404, "ResourceNotFound" if "job" not in what.lower() else "UserError",
                  f"{what} was not found.")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    service: Any = None  # set on the subclass ``serve`` builds

    def log_message(self, *_: Any) -> None:  # the service keeps its own log
        pass

    # --- plumbing -----------------------------------------------------------------------------

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _send(self, status: int, body: Any = None, *, headers: dict[str, str] | None = None,
              raw: bytes | None = None, content_type: str = "application/json") -> None:
        data = raw if raw is not None else (b"" if body is None else json.dumps(body).encode())
        # Logged before the answer leaves, so that a test that saw the answer sees the entry.
        svc = self.service
        with svc._lock:
            svc.requests.append(_request(self.command, self._path, self._query, status,
                                         self._sent))
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("x-ms-request-id", str(uuid.uuid4()))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        self.status_sent = status

    def _dispatch(self) -> None:
        svc = self.service
        split = urlsplit(self.path)
        path, query = unquote(split.path), parse_qs(split.query)
        host = (self.headers.get("Host") or "").rsplit(":", 1)[0].lower()
        if host == svc.storage_host:
            # reached through the proxy by the account's host: the Blob service's host-style
            # paths (/container/blob), answered as the path-style ones (/account/container/blob)
            path = f"/{svc.storage_account}{path}"
        body = self._body()
        started = time.perf_counter()
        self._path, self._query, self._sent = path, split.query, body
        self.status_sent = 0
        try:
            for match, hook in list(svc.hooks):
                if re.search(match, f"{self.command} {path}"):
                    hook(self.command, path)
            fault = self._fault(path)
            if fault is not None:
                self._send_fault(fault, path)
            else:
                self._route(path, query, body)
        except Answer as answer:
            self._send(answer.status, payloads.mlflow_error(answer.code, answer.message)
                       if "/mlflow/" in path else payloads.arm_error(answer.code, answer.message))
        except Exception as exc:  # a bug in the loopback service or in a test's script/hook
            with svc._lock:
                svc.errors.append(f"{self.command} {path}: {type(exc).__name__}: {exc}")
            self._send(500, payloads.arm_error("LoopbackServiceBug",
                                               f"{type(exc).__name__}: {exc}"))
        finally:
            with svc._lock:
                svc.answering_s += time.perf_counter() - started

    do_GET = do_PUT = do_POST = do_PATCH = do_DELETE = do_HEAD = _dispatch

    def _fault(self, path: str):
        if path.startswith("/metadata/"):
            return None
        svc = self.service
        with svc._lock:
            for fault in svc.faults:
                if fault.matches(self.command, path) and (fault.times is None
                                                          or fault.hits < fault.times):
                    fault.hits += 1
                    return fault
        return None

    def _send_fault(self, fault, path: str) -> None:
        code, message = DEFAULT_ERRORS.get(fault.status, ("Error", "The request failed."))
        headers = {}
        if fault.retry_after is not None:
            headers["Retry-After"] = f"{fault.retry_after:g}"
        if fault.status == 401:
            headers["WWW-Authenticate"] = 'Bearer authorization_uri="https://login.loopback.test"'
        code, message = fault.code or code, fault.message or message
        if "/mlflow/" in path:
            self._send(fault.status, payloads.mlflow_error(code, message), headers=headers)
        else:
            self._send(fault.status, payloads.arm_error(code, message), headers=headers)

    def _authorized(self) -> None:
        header = self.headers.get("Authorization") or ""
        if not header.startswith("Bearer "):
            raise Answer(401, "AuthenticationFailed", "Authentication failed. The "
                         "'Authorization' header is missing.")
        claims = _claims(header[len("Bearer "):])
        if claims is None:
            raise Answer(401, "InvalidAuthenticationToken", "The access token is invalid.")
        if int(claims.get("exp", 0)) < time.time():
            raise Answer(401, "ExpiredAuthenticationToken", "The access token expiry UTC time "
                         "is earlier than current UTC time.")

    # --- routing ------------------------------------------------------------------------------

    def _route(self, path: str, query: dict[str, list[str]], body: bytes) -> None:
        svc = self.service
        if path.startswith("/metadata/endpoints"):
            return self._send(200, [self._cloud()])
        if path.startswith(f"/{svc.storage_account}/"):
            return self._blob(path, query, body)
        if path.rstrip("/") == "/discovery":  # anonymous, as the service's is
            return self._send(200, payloads.discovery(svc))
        self._authorized()
        for prefix in ("/history/v1.0", "/mlflow/v1.0", "/mlflow/v2.0", "/data/v1.0",
                       "/modelregistry/v1.0"):
            if path.startswith(prefix + "/subscriptions/"):
                rest = self._in_workspace(path[len(prefix):])
                if prefix == "/history/v1.0":
                    return self._history(rest, query, body)
                if prefix in ("/data/v1.0", "/modelregistry/v1.0"):
                    return self._resolve_uris(prefix, rest, body)
                return self._mlflow(rest, query, body)
        region = re.match(r"/subscriptions/(?P<sub>[^/]+)/providers/Microsoft\."
                          r"MachineLearningServices/locations/(?P<loc>[^/]+)/(?P<what>vmSizes|"
                          r"usages)$", path)
        if region is not None and self.command == "GET":
            return self._region(region["sub"], region["loc"], region["what"])
        return self._management(self._in_workspace(path), query, body)

    def _region(self, sub: str, location: str, what: str) -> None:
        svc = self.service
        if sub != svc.subscription_id:
            raise Answer(404, "SubscriptionNotFound",
                         f"The subscription '{sub}' could not be found.")
        if location.lower() != svc.location.lower():
            return self._send(200, payloads.page([]))
        if what == "vmSizes":
            return self._send(200, payloads.vm_sizes(svc.vm_sizes))
        return self._send(200, payloads.page(payloads.usages(svc, svc.usages)))

    def _cloud(self) -> dict[str, Any]:
        url = self.service.url + "/"
        # ARM's cloud metadata document (the fields azure-ai-ml's _convert_arm_to_cli reads).
        return {"name": "LoopbackCloud", "portal": "https://portal.azure.test/",
                "resourceManager": url, "authentication": {
                    "loginEndpoint": url + "login/", "audiences": [url]},
                "suffixes": {"storage": self.service.storage_suffix,
                             "acrLoginServer": "azurecr.test"},
                "media": url, "graphAudience": url, "graph": url, "name_": "LoopbackCloud",
                "batch": url, "sqlManagement": url, "gallery": url, "activeDirectoryDataLake": url}

    def _in_workspace(self, path: str) -> str:
        svc = self.service
        match = re.match(WS, path)
        if match is None:
            raise Answer(404, "InvalidResourceType", f"No route for {self.command} {path}.")
        if match["sub"] != svc.subscription_id:
            raise Answer(404, "SubscriptionNotFound",
                         f"The subscription '{match['sub']}' could not be found.")
        if match["rg"].lower() != svc.resource_group.lower():
            raise Answer(404, "ResourceGroupNotFound",
                         f"Resource group '{match['rg']}' could not be found.")
        if match["ws"].lower() != svc.workspace_name.lower():
            raise Answer(404, "ResourceNotFound",
                         f"The Resource 'Microsoft.MachineLearningServices/workspaces/"
                         f"{match['ws']}' under resource group '{match['rg']}' was not found.")
        return path[match.end():]

    # --- the management API ---------------------------------------------------------------

    def _management(self, rest: str, query: dict[str, list[str]], body: bytes) -> None:
        svc, method = self.service, self.command
        parts = [p for p in rest.split("/") if p]
        sent = json.loads(body) if body and body.strip() else {}
        if not parts and method == "GET":
            return self._send(200, payloads.workspace(svc))
        kind = parts[0] if parts else ""
        if kind == "datastores" and len(parts) == 2 and method == "GET":
            return self._send(200, payloads.datastore(svc, parts[1]))
        if kind == "datastores" and len(parts) == 1 and method == "GET":
            return self._send(200, payloads.page([payloads.datastore(svc, "workspaceblobstore")]))
        if kind == "datastores" and len(parts) == 3 and parts[2] == "listSecrets":
            # an expirable secret is a SAS token (recordings.MODEL_CRUD)
            return self._send(200, payloads.datastore_secrets(
                svc, expirable=bool(sent.get("expirableSecret"))))
        if kind in ("codes", "components") and len(parts) >= 3 and parts[2] == "versions":
            return self._asset(kind, parts, query, sent)
        if kind == "models" and len(parts) in (3, 4) and parts[2] == "versions":
            return self._model(parts, query, sent)
        if kind == "components" and len(parts) == 2 and method == "GET":
            versions = [v for (k, n, v) in svc.assets if k == "components" and n == parts[1]]
            if not versions:
                raise not_found(f"Component {parts[1]}")
            return self._send(200, payloads.container(svc, kind, parts[1], versions))
        if kind in ("data", "environments") and len(parts) == 2 and method == "GET":
            known = svc.data if kind == "data" else svc.environments
            versions = [v for (n, v) in known if n == parts[1]]
            if not versions:
                raise not_found(f"{'Data' if kind == 'data' else 'Environment'} {parts[1]}")
            return self._send(200, payloads.container(
                svc, kind, parts[1], versions,
                known[(parts[1], versions[0])] if kind == "data" else None))
        if kind in ("data", "environments") and len(parts) == 3 and parts[2] == "versions" \
                and method == "GET":  # newest first, as `$orderBy=createdtime desc` asks
            known = svc.data if kind == "data" else svc.environments
            versions = sorted((v for (n, v) in known if n == parts[1]),
                              key=lambda v: (len(v), v), reverse=True)
            top = (query.get("$top") or [None])[0]
            versions = versions[:int(top)] if top and top.isdigit() else versions
            return self._send(200, payloads.page([
                payloads.environment_version(svc, parts[1], v, known[(parts[1], v)],
                                             svc.conda_files.get((parts[1], v)))
                if kind == "environments" else self._data_version(parts[1], v)
                for v in versions]))
        if kind == "environments" and len(parts) == 4 and method == "GET":
            image = svc.environments.get((parts[1], parts[3]))
            if image is None:
                raise not_found(f"Environment {parts[1]}:{parts[3]}")
            return self._send(200, payloads.environment_version(
                svc, parts[1], parts[3], image, svc.conda_files.get((parts[1], parts[3]))))
        if kind == "computes" and len(parts) == 2 and method == "GET":
            found = svc.computes.get(parts[1])
            if found is None:  # 404 with an empty body (no recording holds one: azure-ai-ml's
                # _resolve_compute_id says why it rewords it; docs/azure.md)
                return self._send(404, raw=b"")
            return self._send(200, payloads.compute(svc, parts[1], *found))
        if kind == "data" and len(parts) == 4 and method == "GET":
            if (parts[1], parts[3]) not in svc.data:
                raise not_found(f"Data {parts[1]}:{parts[3]}")
            return self._send(200, self._data_version(parts[1], parts[3]))
        if kind == "jobs":
            return self._jobs(parts[1:], query, sent)
        raise Answer(404, "NoRoute", f"The loopback service has no route for {method} {rest}.")

    def _data_version(self, name: str, version: str) -> dict[str, Any]:
        svc = self.service
        uri = (f"azureml://subscriptions/{svc.subscription_id}/resourcegroups/"
               f"{svc.resource_group}/workspaces/{svc.workspace_name}/datastores/"
               f"workspaceblobstore/paths/data/{name}/{version}/")
        return payloads.data_version(svc, name, version, svc.data[(name, version)], uri)

    def _asset(self, kind: str, parts: list[str], query: dict[str, list[str]],
               sent: dict[str, Any]) -> None:
        svc, method = self.service, self.command
        name = parts[1]
        if len(parts) == 3 and method == "GET":  # list versions (codes: by content hash)
            # A content-hash query finds a code version of any name (the client then reuses
            # that name and version): anonymous code gets a fresh name on every upload.
            wanted = (query.get("hash") or [None])[0]
            found = [a for (k, n, _), a in svc.assets.items() if k == kind
                     and (n == name if wanted is None else (a.body.get("properties") or {})
                          .get("properties", {}).get("hash_sha256") == wanted)]
            if "createdtime desc" in (query.get("$orderBy") or [""])[0]:
                found.reverse()  # newest first: a label (recordings.COMPONENT_LATEST)
            top = (query.get("$top") or [None])[0]
            found = found[:int(top)] if top and top.isdigit() else found
            return self._send(200, payloads.page([self._asset_payload(kind, a) for a in found]))
        version = parts[3]
        if len(parts) == 5 and parts[4] == "startPendingUpload" and method == "POST":
            upload = str(uuid.uuid4())
            blob_prefix = f"LocalUpload/{upload}"
            container_url = f"{svc.url}/{svc.storage_account}/{svc.container}"
            sas = "sv=2021-08-06&sr=c&sig=loopback&se=2099-01-01T00%3A00%3A00Z&sp=rcwl"
            return self._send(200, payloads.pending_upload(
                svc, upload, f"{container_url}/{blob_prefix}?{sas}",
                f"{container_url}/{blob_prefix}"))
        key = (kind, name, version)
        if len(parts) == 4 and method == "GET":
            if key not in svc.assets:
                raise not_found(f"{kind[:-1].capitalize()} {name}:{version}")
            return self._send(200, self._asset_payload(kind, svc.assets[key]))
        if len(parts) == 4 and method == "PUT":
            from loopback.azureml.service import Asset

            with svc._lock:
                svc.assets[key] = Asset(kind, name, version, sent)
            return self._send(201 if kind == "codes" else 200,
                              self._asset_payload(kind, svc.assets[key]))
        raise Answer(404, "NoRoute", f"No route for {method} {'/'.join(parts)}.")

    def _model(self, parts: list[str], query: dict[str, list[str]], sent: dict[str, Any]) -> None:
        """The model registry: list a model's versions (newest first for ``$orderBy=createdtime
        desc``, ``$top``), get one, create one. A version's files are where its ``modelUri``
        says (the client uploaded them to the datastore first); a version is immutable but for
        its description and tags: a PUT that changes its path is the service's UserError."""
        from loopback.azureml.service import Asset

        svc, method, name = self.service, self.command, parts[1]
        if len(parts) == 3 and method == "GET":
            found = [a for (k, n, _), a in svc.assets.items() if k == "models" and n == name]
            if not found:  # no container: 404 ModelNotFound (recordings.MODEL_CRUD)
                return self._send(404, payloads.model_not_found(name))
            if "createdtime desc" in (query.get("$orderBy") or [""])[0]:
                found.reverse()
            top = (query.get("$top") or [None])[0]
            found = found[:int(top)] if top and top.isdigit() else found
            return self._send(200, payloads.page([payloads.model_version(
                svc, a.name, str(a.version), a.body) for a in found]))
        key = ("models", name, parts[3])
        if method == "GET":
            if key not in svc.assets:
                raise Answer(404, "UserError", f"Could not find asset with ID: "
                             f"azureml://locations/{svc.location}/workspaces/{svc.workspace_id}"
                             f"/models/{name}/versions/{parts[3]}")
            return self._send(200, payloads.model_version(svc, name, parts[3],
                                                          svc.assets[key].body))
        if method == "PUT":
            uri = (sent.get("properties") or {}).get("modelUri")
            with svc._lock:
                before = svc.assets.get(key)
                if before is not None and (before.body.get("properties") or {}).get(
                        "modelUri") != uri:
                    raise Answer(400, "UserError", "Asset paths cannot be updated.")
                svc.assets[key] = Asset("models", name, parts[3], sent)
            return self._send(200 if before is not None else 201,
                              payloads.model_version(svc, name, parts[3], sent))
        raise Answer(405, "NoRoute", f"No route for {method} models/{'/'.join(parts[1:])}.")

    def _asset_payload(self, kind: str, asset) -> dict[str, Any]:
        if kind == "codes":
            return payloads.code_version(self.service, asset.name, asset.version, asset.body)
        return payloads.component_version(self.service, asset.name, asset.version, asset.body)

    def _jobs(self, parts: list[str], query: dict[str, list[str]], sent: dict[str, Any]) -> None:
        svc, method = self.service, self.command
        if not parts and method == "GET":
            return self._send(200, payloads.page([payloads.job_base(svc, j)
                                                  for j in svc.pipelines]))
        name = parts[0]
        if len(parts) == 1 and method == "PUT":
            # 201 with the resource's URL in Location (recorded: test_pipeline_job_child_run_
            # download, the PUT entry)
            return self._send(201, payloads.job_base(svc, self._create_job(name, sent)),
                              headers={"Location": f"{svc.url}{self.path}"})
        job = svc.jobs.get(name)
        if job is None:
            raise Answer(404, "UserError", f"Job {name} was not found in workspace "
                                           f"{svc.workspace_name}.")
        if len(parts) == 1 and method == "GET":
            if job.parent is not None:
                return self._send(200, payloads.child_envelope(svc, job))
            job._advance()
            return self._send(200, payloads.job_base(svc, job))
        if len(parts) == 2 and parts[1] == "cancel" and method == "POST":
            # No recording: the ARM specification's Job_Cancel (examples/Job/cancel.json)
            # answers 202 with Location, polled until it answers 200 (final-state-via location)
            job.set_status("CancelRequested")
            where = f"{svc.url}{self.path.split('?')[0].rsplit('/cancel', 1)[0]}"
            return self._send(202, None, headers={
                "Location": where + "?" + (self.path.split("?", 1) + [""])[1],
                "Retry-After": "0"})
        raise Answer(404, "NoRoute", f"No route for {method} jobs/{'/'.join(parts)}.")

    def _create_job(self, name: str, sent: dict[str, Any]) -> Job:
        svc = self.service
        props = dict(sent.get("properties") or {})
        kind = str(props.get("jobType") or "Command")
        with svc._lock:
            if name in svc.jobs:
                raise Answer(409, "UserError", f"A job named {name} already exists; job "
                                               f"properties cannot be updated.")
            self._check_references(props)
            job = Job(svc, name, kind, display_name=props.get("displayName") or name,
                      experiment=props.get("experimentName") or "Default", definition=props,
                      tags=props.get("tags") or {},
                      properties={**(props.get("properties") or {}),
                                  "azureml.runsource": "azureml.PipelineRun" if kind == "Pipeline"
                                  else "azureml.StepRun", "runSource": "MFE", "runType": "HTTP"})
            job.inputs = dict(props.get("inputs") or {})
            for port, out in job.declared_outputs().items():
                from loopback.azureml.jobs import Output

                job.outputs[port] = Output(svc.default_output_uri(job, port), out)
            svc.jobs[name] = job
        return job

    def _check_references(self, props: dict[str, Any]) -> None:
        """What the service validates at submission: computes, environments, components."""
        svc = self.service
        default = ((props.get("settings") or {}).get("default_compute")
                   or props.get("computeId"))
        computes = [default] + [n.get("computeId") for n in (props.get("jobs") or {}).values()
                                if isinstance(n, dict)]
        for arm_id in computes:
            if isinstance(arm_id, str) and arm_id:
                name = arm_id.rstrip("/").rsplit("/", 1)[-1].removeprefix("azureml:")
                if name not in svc.computes and name != "serverless":  # serverless: no cluster
                    raise Answer(400, "UserError", f"Compute {name} was not found in "
                                                   f"workspace {svc.workspace_name}.")
        for node in (props.get("jobs") or {}).values():
            spec = self.service._component_spec(node.get("componentId")
                                                if isinstance(node, dict) else None)
            env = spec.get("environment") if isinstance(spec, dict) else None
            # a registry's environment is the registry's to resolve: no workspace lookup
            registry = str(env or "").startswith("azureml://registries/")
            m_env = re.search(r"/environments/([^/]+)/versions/([^/]+)$", env or "")
            if m_env and not registry and (m_env.group(1), m_env.group(2)) not in svc.environments:
                raise Answer(400, "UserError", f"Environment {m_env.group(1)}:{m_env.group(2)} "
                                               f"was not found in workspace "
                                               f"{svc.workspace_name}.")
            cid = node.get("componentId") if isinstance(node, dict) else None
            if isinstance(cid, str):
                m = re.search(r"/components/([^/]+)/versions/([^/]+)$", cid)
                if m and ("components", m.group(1), m.group(2)) not in svc.assets:
                    raise Answer(400, "UserError", f"Component {m.group(1)}:{m.group(2)} was "
                                                   f"not found.")

    # --- run history ------------------------------------------------------------------------

    def _history(self, rest: str, query: dict[str, list[str]], body: bytes) -> None:
        svc = self.service
        parts = [p for p in rest.split("/") if p]
        if parts == ["rundata"] and self.command == "POST":
            # what azure-ai-ml's jobs.download reads a job's outputs from
            sent = json.loads(body) if body.strip() else {}
            job = svc.jobs.get(str(sent.get("runId") or ""))
            if job is None:
                raise Answer(404, "UserError", f"Run {sent.get('runId')} was not found.")
            return self._send(200, payloads.run_data(svc, job))
        # runs/{id}, runs/{id}/children, experimentids/{exp}/runs/{id}[/children]
        if parts[:1] == ["experimentids"]:
            parts = parts[2:]
        if len(parts) >= 2 and parts[0] == "runs":
            job = svc.jobs.get(parts[1])
            if job is None:
                raise Answer(404, "UserError", f"Run {parts[1]} was not found.")
            if len(parts) == 2 and self.command == "GET":
                return self._send(200, payloads.run(svc, job))
            if len(parts) == 3 and parts[2] == "children":
                return self._children(job, query)
        raise Answer(404, "NoRoute", f"No route for {self.command} history {rest}.")

    def _children(self, job: Job, query: dict[str, list[str]]) -> None:
        svc = self.service
        children = job.listed_children
        top = int((query.get("$top") or [0])[0] or 0)
        start = int((query.get("$continuationtoken") or ["0"])[0] or 0)
        size = top or svc.page_size or len(children) or 1
        chunk = children[start:start + size]
        token = str(start + len(chunk)) if start + len(chunk) < len(children) else None
        return self._send(200, payloads.run_list(svc, chunk, continuation=token))

    # --- the data and model planes: an output's asset id -> where it lives --------------------

    def _resolve_uris(self, prefix: str, rest: str, body: bytes) -> None:
        svc = self.service
        wanted = {"/data/v1.0": "/dataversion/batchGetResolvedUris",
                  "/modelregistry/v1.0": "/models/batchGetResolvedUris"}[prefix]
        if rest.rstrip("/") != wanted or self.command != "POST":
            raise Answer(404, "NoRoute", f"No route for {self.command} {prefix}{rest}.")
        ids = [str(i) for i in (json.loads(body) if body.strip() else {}).get("values") or []]
        found = {}
        for asset_id in ids:
            out = svc.output_of_asset(asset_id)
            if out is not None:
                found[asset_id] = out
        if prefix == "/data/v1.0":
            return self._send(200, payloads.resolved_data_uris(svc, found))
        return self._send(200, payloads.resolved_model_paths(svc, found))

    # --- MLflow -----------------------------------------------------------------------------------

    def _mlflow(self, rest: str, query: dict[str, list[str]], body: bytes) -> None:
        svc = self.service
        parts = rest.strip("/")
        run_id = (query.get("run_id") or query.get("run_uuid") or [None])[0]
        if parts == "api/2.0/mlflow/runs/log-batch" and self.command == "POST":
            # what a job's MLflow client sends (MLFLOW_RUN_ID is the job's name)
            sent = json.loads(body) if body.strip() else {}
            job = svc.jobs.get(str(sent.get("run_id") or sent.get("run_uuid") or ""))
            if job is None:
                raise Answer(404, "RESOURCE_DOES_NOT_EXIST",
                             f"Run '{sent.get('run_id')}' not found.")
            for m in sent.get("metrics") or []:
                job.log_metric(str(m["key"]), float(m["value"]), int(m.get("step") or 0),
                               int(m.get("timestamp") or 0))
            for t in sent.get("tags") or []:
                job.set_tag(str(t["key"]), str(t["value"]))
            for p in sent.get("params") or []:
                job.log_param(str(p["key"]), p["value"])
            return self._send(200, {})
        if parts == "api/2.0/mlflow/runs/get" and self.command == "GET":
            job = svc.jobs.get(run_id or "")
            # a job that never started has no MLflow run yet (issue 35: the workspace's
            # runs/get of a child that never started answers 404; MLflow's REST API words it
            # RESOURCE_DOES_NOT_EXIST)
            if job is None or job.started_at is None:
                raise Answer(404, "RESOURCE_DOES_NOT_EXIST", f"Run '{run_id}' not found.")
            return self._send(200, payloads.mlflow_run(svc, job))
        if parts == "api/2.0/mlflow/metrics/get-history" and self.command == "GET":
            job = svc.jobs.get(run_id or "")
            if job is None:
                raise Answer(404, "RESOURCE_DOES_NOT_EXIST", f"Run '{run_id}' not found.")
            key = (query.get("metric_key") or [""])[0]
            return self._send(200, {"metrics": [
                {"key": m.key, "value": m.value, "timestamp": m.timestamp, "step": m.step}
                for m in job.mlflow.metrics if m.key == key]})
        if parts == "api/2.0/mlflow/artifacts/list" and self.command == "GET":
            job = svc.jobs.get(run_id or "")
            if job is None:
                raise Answer(404, "RESOURCE_DOES_NOT_EXIST", f"Run '{run_id}' not found.")
            return self._send(200, _artifact_listing(job, (query.get("path") or [""])[0]))
        raise Answer(404, "ENDPOINT_NOT_FOUND", f"No MLflow endpoint {self.command} {parts}.")

    # --- blob storage ------------------------------------------------------------------------

    def _blob(self, path: str, query: dict[str, list[str]], body: bytes) -> None:
        svc, method = self.service, self.command
        _, _account, container, *rest = path.split("/")
        blob = "/".join(rest)
        comp = (query.get("comp") or [None])[0]
        headers = {"x-ms-version": self.headers.get("x-ms-version", "2021-08-06"),
                   "ETag": f'"0x{uuid.uuid4().hex[:16].upper()}"',
                   "Last-Modified": time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime())}
        key = (container, blob)
        if method == "PUT" and comp == "block":
            block = (query.get("blockid") or [""])[0]
            with svc._lock:
                svc.blocks[(container, blob, block)] = body
            return self._send(201, raw=b"", headers=headers)
        if method == "PUT" and comp == "blocklist":
            ids = re.findall(rb"<(?:Latest|Committed|Uncommitted)>([^<]+)</", body)
            with svc._lock:
                svc.blobs[key] = b"".join(svc.blocks.pop((container, blob, i.decode()), b"")
                                          for i in ids)
                svc.blob_metadata[key] = self._blob_metadata()
            return self._send(201, raw=b"", headers=headers)
        if method == "PUT" and comp == "metadata":
            with svc._lock:
                svc.blob_metadata[key] = self._blob_metadata()
            return self._send(200, raw=b"", headers=headers)
        if method == "PUT" and comp is None:
            with svc._lock:
                svc.blobs[key] = body
                svc.blob_metadata[key] = self._blob_metadata()
            return self._send(201, raw=b"", headers={**headers, "Content-MD5": base64.b64encode(
                __import__("hashlib").md5(body).digest()).decode()})
        if method == "GET" and comp == "list":
            prefix = (query.get("prefix") or [""])[0]
            return self._send(200, raw=_blob_listing(svc, container, prefix, query),
                              content_type="application/xml", headers=headers)
        if method in ("GET", "HEAD") and blob:
            data = svc.blobs.get(key)
            if data is None:
                return self._send(404, raw=_blob_error("BlobNotFound",
                                                       "The specified blob does not exist."),
                                  content_type="application/xml",
                                  headers={**headers, "x-ms-error-code": "BlobNotFound"})
            meta = {f"x-ms-meta-{k}": v for k, v in svc.blob_metadata.get(key, {}).items()}
            headers = {**headers, **meta, "x-ms-blob-type": "BlockBlob", "Accept-Ranges": "bytes"}
            wanted = self.headers.get("x-ms-range") or self.headers.get("Range")
            found = re.match(r"bytes=(\d+)-(\d*)$", wanted or "")
            if found is None:
                return self._send(200, raw=data, content_type="application/octet-stream",
                                  headers=headers)
            start = int(found.group(1))
            end = min(int(found.group(2) or len(data) - 1), len(data) - 1)
            if start >= len(data):  # as the service answers a range past the end
                return self._send(416, raw=_blob_error("InvalidRange", "The range specified "
                                                       "is invalid for the current size of the "
                                                       "resource."),
                                  content_type="application/xml",
                                  headers={**headers, "Content-Range": f"bytes */{len(data)}",
                                           "x-ms-error-code": "InvalidRange"})
            return self._send(206, raw=data[start:end + 1],
                              content_type="application/octet-stream",
                              headers={**headers,
                                       "Content-Range": f"bytes {start}-{end}/{len(data)}"})
        return self._send(400, raw=_blob_error("UnsupportedOperation", f"{method} {path}"),
                          content_type="application/xml")

    def _blob_metadata(self) -> dict[str, str]:
        return {k[len("x-ms-meta-"):]: v for k, v in self.headers.items()
                if k.lower().startswith("x-ms-meta-")}


def _artifact_listing(job: Job, path: str) -> dict[str, Any]:
    prefix = path.strip("/") + "/" if path.strip("/") else ""
    seen: dict[str, dict[str, Any]] = {}
    for name, data in sorted(job.mlflow.artifacts.items()):
        if not name.startswith(prefix):
            continue
        head, sep, _ = name[len(prefix):].partition("/")
        if sep:
            seen.setdefault(prefix + head, {"path": prefix + head, "is_dir": True})
        else:
            seen[name] = {"path": name, "is_dir": False, "file_size": len(data)}
    return {"root_uri": f"azureml://experiments/{job.experiment}/runs/{job.name}/artifacts",
            "files": list(seen.values())}


def _blob_listing(svc: Any, container: str, prefix: str, query: dict[str, list[str]]) -> bytes:
    from xml.sax.saxutils import escape

    items = sorted((b, d) for (c, b), d in svc.blobs.items() if c == container
                   and b.startswith(prefix))
    blobs = "".join(
        f"<Blob><Name>{escape(b)}</Name><Properties><Content-Length>{len(d)}</Content-Length>"
        f"<BlobType>BlockBlob</BlobType></Properties>"
        + ("<Metadata>" + "".join(f"<{k}>{escape(v)}</{k}>" for k, v in
                                  svc.blob_metadata.get((container, b), {}).items())
           + "</Metadata>" if "metadata" in (query.get("include") or [""])[0] else "")
        + "</Blob>" for b, d in items)
    return (f'<?xml version="1.0" encoding="utf-8"?><EnumerationResults '
            f'ServiceEndpoint="{quote(svc.url)}/" ContainerName="{escape(container)}">'
            f"<Prefix>{escape(prefix)}</Prefix><Blobs>{blobs}</Blobs><NextMarker /></"
            f"EnumerationResults>").encode()


def _blob_error(code: str, message: str) -> bytes:
    return (f'<?xml version="1.0" encoding="utf-8"?><Error><Code>{code}</Code>'
            f"<Message>{message}</Message></Error>").encode()


def _claims(token: str) -> dict[str, Any] | None:
    try:
        payload = token.split(".")[1]
        return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (IndexError, ValueError):
        return None


def _request(method: str, path: str, query: str, status: int, body: bytes):
    from loopback.azureml.service import Request

    return Request(method, path, query, status, body)


def serve(service: Any, cert: Path, key: Path) -> ThreadingHTTPServer:
    """Serve ``service`` over HTTPS on a free 127.0.0.1 port, in a daemon thread."""
    handler = type("LoopbackHandler", (Handler,), {"service": service})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(cert), str(key))
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, name="loopback-azureml", daemon=True).start()
    return server
