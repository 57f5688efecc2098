"""Does a value that mlpipe records look like a credential? Parameter values and declared
``environment_variables`` are written in clear to the store, the evidence bundle, the step
logs and the Azure ML export; a key or token there is leaked to everyone who can read them
(MP961). Judged by the value's form (known key and token prefixes, private keys, URLs with a
password, connection strings) and by a credential-like name holding a literal."""
from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from mlpipe import codes
from mlpipe.checks.registry import check
from mlpipe.checks.where import at_step
from mlpipe.diagnostics import Diagnostic
from mlpipe.graph import FromInput, FromLiteral, Graph
from mlpipe.spec import InputRole, ParamType

_FORMS = (
    (re.compile(r"\b(AKIA|ASIA)[0-9A-Z]{16}\b"), "an AWS access key id"),
    (re.compile(r"\b(ghp|gho|ghs|ghu|ghr)_[A-Za-z0-9]{30,}|\bgithub_pat_[A-Za-z0-9_]{30,}"),
     "a GitHub token"),
    (re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"), "a Slack token"),
    (re.compile(r"\bsk[-_](live_|test_|proj-)?[A-Za-z0-9_-]{20,}"), "an API secret key"),
    (re.compile(r"\bAIza[0-9A-Za-z_-]{35}\b"), "a Google API key"),
    (re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"), "a private key"),
    (re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
     "a JSON web token"),
    (re.compile(r"(AccountKey|SharedAccessKey)=[A-Za-z0-9+/=]{20,}", re.I),
     "a storage connection string with its key"),
    (re.compile(r"[?&]sig=[A-Za-z0-9%+/=]{20,}"), "a SAS URL with its signature"),
    (re.compile(r"\b[a-z][a-z0-9+.-]*://[^/\s:@]+:[^/\s@]+@"), "a URL with a password"),
)
_NAME = re.compile(r"pass(word|wd)?|secret|token|api_?key|access_?key|private_?key|"
                   r"credential|auth_?token|authorization|conn(ection)?_?str", re.I)
_PLACEHOLDER = re.compile(r"^\s*$|^\$|^<.*>$|^\*+$|^(x+|changeme|none|null|false|true)$|"
                          r"^azureml:|^\{\{.*\}\}$", re.I)


def credential_kind(name: str, value: Any) -> str | None:
    """What ``value`` (given for ``name``) looks like, when it looks like a credential.

    Example:
        >>> credential_kind("region", "AKIAIOSFODNN7EXAMPLE")
        'an AWS access key id'
        >>> credential_kind("db_password", "hunter2hunter2"), credential_kind("epochs", "20")
        ('a password or token (by its name)', None)
    """
    if not isinstance(value, str):
        return None
    for pattern, kind in _FORMS:
        if pattern.search(value):
            return kind
    if _NAME.search(name) and len(value) >= 6 and not _PLACEHOLDER.search(value):
        return "a password or token (by its name)"
    return None


HINT = ("declare the parameter Param[Secret] and give the value when submitting (--secret "
        "NAME=ENV_VAR): it is then recorded only as a keyed hash (or let the step read it from "
        "a secret store at run time); rotate it if it was recorded")



def submitted_credentials(params: dict[str, Any], spec: Any = None) -> list[Diagnostic]:
    """MP961 for each ``--param`` value given when submitting that looks like a credential
    (parameter values are recorded in clear); a secret (``Secret``) and a value for a declared
    ``Param[Secret]`` (recorded as a keyed hash: ``secrets_on_command_line``) are not.

    Example:
        >>> [d.code for d in submitted_credentials({"note": "AKIAIOSFODNN7EXAMPLE"})]
        ['MP961']
    """
    from mlpipe.secret import Secret

    found = []
    for name in params:
        value = params[name]
        if isinstance(value, Secret) or name in secrets_on_command_line({name: value}, spec):
            continue
        kind = credential_kind(name, value)
        if kind:
            found.append(Diagnostic.of(
                codes.CREDENTIAL_IN_RECORDED_VALUE,
                f"--param {name} looks like {kind}; parameter values are recorded in clear "
                f"(store, bundle, export)", hint=HINT))
    return found


def secrets_on_command_line(params: dict[str, Any], spec: Any = None) -> list[str]:
    """The ``Param[Secret]`` parameters of ``spec`` given a plain ``--param`` value: recorded
    only as a keyed hash, but shown to this machine's other users (ps) and shell history."""
    from mlpipe.secret import Secret

    return [name for name, value in params.items()
            if not isinstance(value, Secret) and spec is not None
            and (declared := spec.input(name)) is not None and declared.secret]

@check(codes.CREDENTIAL_IN_RECORDED_VALUE)
def credentials_in_recorded_values(graph: Graph) -> Iterator[Diagnostic]:
    for node in graph.step_nodes():
        c = node.component
        for name, value in c.environment_variables:
            kind = credential_kind(name, value)
            if kind:
                yield Diagnostic.of(
                    codes.CREDENTIAL_IN_RECORDED_VALUE,
                    f"environment variable {name!r} of step '{node.id}' looks like {kind}; "
                    f"declared variables are recorded in clear (store, bundle, export)",
                    hint=HINT, **at_step(node))
        for name, endpoint in node.bindings.items():
            declared = c.param(name)
            if (isinstance(endpoint, FromLiteral) and declared is not None
                    and declared.type is not ParamType.SECRET):  # a Secret's is MP962's
                kind = credential_kind(name, endpoint.value)
                if kind:
                    yield Diagnostic.of(
                        codes.CREDENTIAL_IN_RECORDED_VALUE,
                        f"parameter {name!r} of step '{node.id}' is given a value that looks "
                        f"like {kind}; parameter values are recorded in clear (store, bundle, "
                        f"export)", hint=HINT, **at_step(node, name))
    for inp in graph.spec.inputs:
        kind = credential_kind(inp.name, inp.default)
        if inp.param is not None and kind:
            yield Diagnostic.of(
                codes.CREDENTIAL_IN_RECORDED_VALUE,
                f"pipeline parameter {inp.name!r} defaults to a value that looks like {kind}; "
                f"parameter values are recorded in clear (store, bundle, export)", hint=HINT,
                file=inp.location.file if inp.location else None,
                line=inp.location.line if inp.location else None)


@check(codes.SECRET_RECORDED_IN_CLEAR)
def secrets_kept_secret(graph: Graph) -> Iterator[Diagnostic]:
    for node in graph.step_nodes():
        for param in node.component.params:
            endpoint = node.bindings.get(param.name)
            label = f"'{node.id}.{param.name}'"
            secret = param.type is ParamType.SECRET
            if isinstance(endpoint, FromLiteral) and secret and endpoint.value is not None:
                yield Diagnostic.of(
                    codes.SECRET_RECORDED_IN_CLEAR,
                    f"Secret parameter {label} is given a literal in the pipeline's source, "
                    f"which the code revision and the pipeline's digest hold in clear",
                    hint=f"bind it to a pipeline parameter declared Param[Secret] and give "
                         f"the value when submitting (--secret {param.name}=ENV_VAR)",
                    **at_step(node, param.name))
                continue
            if not isinstance(endpoint, FromInput):
                continue
            source = graph.input(endpoint.name)
            if source is None or source.role is not InputRole.PARAM or source.param is None:
                continue
            given = source.param.type is ParamType.SECRET
            if secret and not given:
                yield Diagnostic.of(
                    codes.SECRET_RECORDED_IN_CLEAR,
                    f"Secret parameter {label} gets pipeline parameter {endpoint.name!r} "
                    f"({source.param.type.value}), whose value is recorded in clear with the run",
                    hint=f"declare pipeline parameter {endpoint.name!r} as Param[Secret]",
                    **at_step(node, param.name))
            elif given and not secret:
                yield Diagnostic.of(
                    codes.SECRET_RECORDED_IN_CLEAR,
                    f"parameter {label} ({param.type.value}) gets Secret pipeline parameter "
                    f"{endpoint.name!r}; the step would record its value in clear",
                    hint=f"declare parameter {param.name!r} of component "
                         f"{node.component.name!r} as Param[Secret]",
                    **at_step(node, param.name))
