"""Findings where engineers look (``check`` and ``submit`` with ``--format github|sarif``): the
diagnostics and findings as GitHub Actions workflow commands and as one SARIF 2.1.0 log for
code scanning. Renders only: it judges nothing, reads no store and decides no exit code.

Both forms take the same items: ``Diagnostic.to_json()`` dicts (``check``) or
``findings.every_finding``'s labelled dicts (``submit``), each placed at its own ``file`` and
``line`` when it has them, else at the pipeline's definition (``where``), since GitHub shows an
annotation or a code-scanning alert only at a file.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

#: SARIF's levels and GitHub's workflow-command names for mlpipe's severities.
SARIF_LEVEL = {"error": "error", "warning": "warning", "info": "note"}
GITHUB_COMMAND = {"error": "error", "warning": "warning", "info": "notice"}
#: The schema a SARIF log names (the OASIS standard's, errata 01).
SARIF_SCHEMA = ("https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/"
                "sarif-schema-2.1.0.json")


def _located(item: dict[str, Any], where: tuple[str, int] | None,
             known: dict[tuple[str, str], tuple[str, int | None]]) -> tuple[str | None, int | None]:
    if item.get("file"):
        return item["file"], item.get("line")
    if (item.get("code"), item.get("message")) in known:
        return known[(item["code"], item["message"])]
    return where if where is not None else (None, None)


def _text(item: dict[str, Any]) -> str:
    origin = f" ({item['source']})" if item.get("source") else ""
    return (f"{item['message']}{origin}"
            + (f"\nhelp: {item['hint']}" if item.get("hint") else ""))


def _escape(value: str, prop: bool = False) -> str:
    """A workflow command's data (or, ``prop``, property value) escaped as the Actions runner
    reads it back: ``%``, CR and LF, and in properties ``:`` and ``,`` too."""
    out = value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return out.replace(":", "%3A").replace(",", "%2C") if prop else out


def github(items: list[dict[str, Any]], where: tuple[str, int] | None = None,
           known: dict[tuple[str, str], tuple[str, int | None]] | None = None) -> str:
    """One ``::error file=F,line=N,title=MP301 name::message`` line per item (``notice`` for
    info), the form GitHub Actions turns into annotations on the pull request's files.

    Args:
        items: diagnostics' JSON dicts or labelled findings.
        where: the pipeline's (file, line), for an item that has no file of its own.
        known: (code, message) -> (file, line) of compile-time diagnostics, which place the
            same finding when a bundle carries it without its location.

    Example:
        >>> github([{"code": "MP301", "name": "artifact-kind-mismatch", "severity": "error",
        ...          "message": "m", "file": "p.py", "line": 7}])
        '::error file=p.py,line=7,title=MP301 artifact-kind-mismatch::m\\n'
    """
    lines = []
    for item in items:
        file, line = _located(item, where, known or {})
        title = f"{item['code']} {item['name']}"
        props = ([f"file={_escape(_relative(file), True)}"] if file else []) \
            + ([f"line={line}"] if file and line else []) \
            + [f"title={_escape(title, True)}"]
        lines.append(f"::{GITHUB_COMMAND[item['severity']]} {','.join(props)}::"
                     f"{_escape(_text(item))}")
    return "".join(line + "\n" for line in lines)


def _relative(file: str) -> str:
    """``file`` as a path relative to the working directory (the repository root in CI), in
    POSIX form; unchanged when it lies outside it."""
    path = Path(file)
    if not path.is_absolute():
        return path.as_posix()
    try:
        return path.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return path.as_posix()


def _location(file: str | None, line: int | None) -> list[dict[str, Any]]:
    if not file:
        return []
    rel = _relative(file)
    artifact = ({"uri": Path(rel).as_uri()} if os.path.isabs(rel) else
                {"uri": rel, "uriBaseId": "%SRCROOT%"})
    return [{"physicalLocation": {"artifactLocation": artifact,
                                  "region": {"startLine": max(int(line or 1), 1)}}}]


def _rule(code: str, item: dict[str, Any]) -> dict[str, Any]:
    from mlpipe.codes import CODES

    known = CODES.get(code)
    name = item.get("name") or code
    rule: dict[str, Any] = {"id": code, "name": name, "help": {
        "text": f"`mlpipe check --explain {code}` prints what it checks, why and the fix "
                f"(docs/checks.md, section {code} {name})"}}
    if known is not None:
        rule["shortDescription"] = {"text": known.summary}
        rule["defaultConfiguration"] = {"level": SARIF_LEVEL[known.severity.value]}
    return rule


def sarif(items: list[dict[str, Any]], where: tuple[str, int] | None = None,
          known: dict[tuple[str, str], tuple[str, int | None]] | None = None) -> str:
    """One SARIF 2.1.0 log (JSON) of the items: one run of the ``mlpipe`` driver, a rule per
    code reported (its name, summary and default level from ``codes``), a result per item at
    its location (relative to ``%SRCROOT%``, the working directory), with its step, origin
    and run as properties. ``where`` and ``known`` as in ``github``."""
    from mlpipe.version import __version__

    codes = list(dict.fromkeys(str(item["code"]) for item in items))
    first = {str(item["code"]): item for item in reversed(items)}
    results = []
    for item in items:
        file, line = _located(item, where, known or {})
        result: dict[str, Any] = {
            "ruleId": str(item["code"]), "ruleIndex": codes.index(str(item["code"])),
            "level": SARIF_LEVEL[item["severity"]],
            "message": {"text": _text(item)},
            "locations": _location(file, line)}
        props = {k: item[k] for k in ("step", "source", "run") if item.get(k)}
        if props:
            result["properties"] = props
        results.append(result)
    log = {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [{
        "tool": {"driver": {"name": "mlpipe", "version": __version__,
                            "semanticVersion": __version__,
                            "rules": [_rule(c, first[c]) for c in codes]}},
        "originalUriBaseIds": {"%SRCROOT%": {"uri": Path.cwd().resolve().as_uri() + "/"}},
        "results": results}]}
    return json.dumps(log, indent=2) + "\n"


def render(fmt: str, items: list[dict[str, Any]], where: tuple[str, int] | None = None,
           known: dict[tuple[str, str], tuple[str, int | None]] | None = None) -> str:
    """``github`` or ``sarif`` by ``fmt``."""
    return (github if fmt == "github" else sarif)(items, where, known)


__all__ = ["github", "render", "sarif"]
