"""What a step's environment must install beyond mlpipe's runtime, and the checks that its
conda/pip specification does (MP634-MP635): what its contracts' validators import (MP634), and
an MLflow client the Azure ML tracking server accepts (MP635). MP631 judges the runtime itself,
MP632 the frameworks the step's code and distribution need.

``step_needs`` is also what ``mlpipe environment`` installs. Pure: reads the declared conda file
and the contracts; imports and installs nothing.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from mlpipe import codes
from mlpipe.checks.environment import PROVIDERS, conda_of, conda_packages
from mlpipe.checks.registry import check
from mlpipe.checks.where import at_step
from mlpipe.contracts import contract_label
from mlpipe.diagnostics import Diagnostic
from mlpipe.distribution import PyTorch, TensorFlow
from mlpipe.environments import normalized, pinned_version, requirement_name, runtime_listing
from mlpipe.graph import Graph, StepNode
from mlpipe.version import DISTRIBUTION

#: MLflow from this version on is refused by the Azure ML tracking server (MP860's rule).
MLFLOW_REJECTED_FROM = (2, 19)
#: The oldest Python that MLflow 2.19 installs on (its Requires-Python: >=3.9): under an
#: older pinned Python an unpinned client resolves below the refused versions.
MLFLOW_REJECTED_NEEDS_PYTHON = (3, 9)
#: The MLflow client lines that the workspace accepts: full mlflow where a validator loads a
#: model (pyfunc needs numpy and pandas, which mlflow-skinny lacks), else the skinny client.
MLFLOW_FULL = "mlflow>=2.16,<2.19"
MLFLOW_SKINNY = "mlflow-skinny>=2.16,<2.19"
AZUREML_MLFLOW = "azureml-mlflow>=1.57"

#: module a validator imports -> (the distributions that provide it, the line to add)
_VALIDATOR_NEEDS: dict[str, tuple[frozenset[str], str]] = {
    "pyarrow": (frozenset({"pyarrow", "pyarrow-core"}), "pyarrow>=14"),
    "mlflow": (frozenset({"mlflow"}), MLFLOW_FULL),  # mlflow-skinny cannot load a pyfunc
    "pint": (frozenset({"pint"}), "pint>=0.24"),
}


def extras_provide(lines: Iterable[str]) -> set[str]:
    """The distributions that the extras of ``mlpipe-aml[...]`` lines install
    (``mlpipe-aml[tabular]==0.1.0`` -> pyarrow, pint), read from this mlpipe's own metadata."""
    from importlib.metadata import PackageNotFoundError, requires

    wanted = set()
    for line in lines:
        listing = runtime_listing(line)
        found = re.search(r"\[([^\]]*)\]", line) if listing and listing[0] else None
        if found:
            wanted |= {normalized(e.strip()) for e in found.group(1).split(",") if e.strip()}
    if not wanted:
        return set()
    try:
        declared = requires(DISTRIBUTION) or []
    except PackageNotFoundError:
        return set()
    provided = set()
    for requirement in declared:
        extra = re.search(r"extra\s*==\s*['\"]([^'\"]+)['\"]", requirement)
        if extra and normalized(extra.group(1)) in wanted:
            name = requirement_name(requirement.split(";", 1)[0])
            if name:
                provided.add(name)
    return provided


@dataclass(frozen=True, slots=True)
class Need:
    """One distribution a step needs in its environment: ``why`` (the contract or import that
    needs it), ``providers`` (the distributions that satisfy it) and ``line`` (the requirement
    to add)."""

    why: str
    port: str | None
    providers: frozenset[str]
    line: str


def _declared(module: str, install: str) -> tuple[frozenset[str], str]:
    """What a user-defined contract's ``requires`` entry asks for: the module's own name, and
    the distribution its install hint names (``("sklearn", "pip install scikit-learn")``)."""
    named = re.findall(r"pip install\s+['\"]?([^'\"\s]+)", install)
    line = named[0] if named else normalized(module)
    name = requirement_name(line)
    return frozenset({normalized(module)} | ({name} if name else set())), line


def _contract_needs(node: StepNode) -> Iterator[Need]:
    for port in (*node.component.inputs, *node.component.outputs):
        contract = port.contract
        if contract is None:
            continue
        modules = [module for module, _ in getattr(contract, "requires", ())]
        columns = getattr(contract, "columns", None) or ()
        if "pyarrow" in modules and any(getattr(c, "unit", None) for c in columns):
            modules.append("pint")  # a unit a file states otherwise is compared with pint
        hints = dict(getattr(contract, "requires", ()))
        for module in modules:
            providers, line = _VALIDATOR_NEEDS.get(module) or _declared(module, hints[module])
            yield Need(f"'{node.id}.{port.name}' declares {contract_label(contract)}, whose "
                       f"validation imports {module}", port.name, providers, line)


def step_needs(node: StepNode, imports: Iterable[str] = ()) -> list[Need]:
    """What the step needs its environment to install beside mlpipe's runtime: its contracts'
    validators' distributions, then the framework its distribution launches and those its code
    ``imports`` (MP632's table), each once.

    Example:
        >>> [n.line for n in step_needs(graph.step("train"))]
        ['pyarrow>=14', 'mlflow>=2.16,<2.19']
    """
    found: dict[str, Need] = {}
    for need in _contract_needs(node):
        found.setdefault(need.line, need)
    dist = node.component.distribution
    if isinstance(dist, PyTorch | TensorFlow):
        framework = "torch" if isinstance(dist, PyTorch) else "tensorflow"
        found[framework] = Need(f"its {type(dist).__name__} distribution", None,
                                PROVIDERS[framework], framework)
    tops = {i.split(".")[0] for i in imports}
    for framework in sorted(tops & set(PROVIDERS)):
        found.setdefault(framework, Need(f"its code imports {framework}", None,
                                         PROVIDERS[framework], framework))
    return list(found.values())


@check(codes.ENVIRONMENT_LACKS_VALIDATOR_NEED)
def validator_needs_in_environment(graph: Graph) -> Iterator[Diagnostic]:
    read: dict[Path, set[str] | None] = {}
    for node in graph.step_nodes():
        conda, env = conda_of(node), node.component.environment
        if conda is None or env is None or node.component.function is None:
            continue  # a registered environment the project does not declare cannot be read
            # here; a command runs no mlpipe
        path, shown = conda
        if path not in read:
            found = conda_packages(path)
            read[path] = None if found is None else found | extras_provide(_lines(path) or ())
        packages = read[path]
        if packages is None:
            continue
        for need in _contract_needs(node):
            if packages & need.providers:
                continue
            skinny = "mlflow-skinny" in packages and "mlflow" in need.providers
            have = (" (it lists mlflow-skinny, which cannot load a model: pyfunc needs numpy "
                    "and pandas)" if skinny else "")
            yield Diagnostic.of(
                codes.ENVIRONMENT_LACKS_VALIDATOR_NEED,
                f"{need.why}, but the conda file of environment {env.name!r} "
                f"({shown}) installs no {' or '.join(sorted(need.providers))}{have}: "
                f"the step would fail when it validates this artifact, after its body ran",
                hint=f"add \"{need.line}\" to the conda file's pip dependencies",
                **at_step(node, need.port))


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text)[:3])


def _admits_rejected(line: str) -> bool:
    """Whether an MLflow requirement lets pip install a version the tracking server refuses:
    no upper bound below 2.19 (unpinned, a lower bound only) or a pin at 2.19 or later."""
    spec = line.split("::")[-1].split(";", 1)[0]
    spec = re.sub(r"^[A-Za-z0-9_.\-\[\]]+", "", spec).replace(" ", "")
    if not spec:
        return True
    if re.fullmatch(r"=[^=<>!~,]+", spec):  # conda's mlflow=2.18
        spec = "==" + spec[1:]
    admits = True
    for clause in spec.split(","):
        m = re.fullmatch(r"(==|===|<=|<|~=|>=|>|!=)([\w.*+!]+)", clause)
        if m is None:
            return False  # not a form read here: judged on Azure ML by MP860, not guessed
        op, version = m.group(1), _version(m.group(2))
        if op in ("==", "==="):
            admits = admits and version >= MLFLOW_REJECTED_FROM
        elif op == "<":
            admits = admits and version > MLFLOW_REJECTED_FROM
        elif op == "<=":
            admits = admits and version >= MLFLOW_REJECTED_FROM
        elif op == "~=":
            admits = admits and (len(version) < 3 or version[:2] >= MLFLOW_REJECTED_FROM)
    return admits


def _lines(conda_file: Path) -> list[str] | None:
    import yaml

    try:
        doc = yaml.safe_load(conda_file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    found = []
    for dep in (doc.get("dependencies") if isinstance(doc, dict) else None) or []:
        if isinstance(dep, str):
            found.append(dep)
        elif isinstance(dep, dict):
            found += [p for p in dep.get("pip") or [] if isinstance(p, str)]
    return found


@check(codes.ENVIRONMENT_MLFLOW_CLIENT_REJECTED)
def mlflow_client_in_environment(graph: Graph) -> Iterator[Diagnostic]:
    seen: set[Path] = set()
    for node in graph.step_nodes():
        conda, env = conda_of(node), node.component.environment
        if conda is None or env is None or conda[0] in seen:
            continue
        path, shown = conda
        seen.add(path)  # one finding per conda file, at its first step
        lines = _lines(path)
        if lines is None:
            continue
        clients = [t for t in lines if requirement_name(t) in ("mlflow", "mlflow-skinny")]
        pythons = [_version(pinned_version(t) or "") for t in lines
                   if requirement_name(t) == "python" and pinned_version(t)]
        old = (bool(pythons) and len(pythons[0]) > 1
               and pythons[0][:2] < MLFLOW_REJECTED_NEEDS_PYTHON)
        rejected = [] if old else [t for t in clients if _admits_rejected(t)]
        where = f"the conda file of environment {env.name!r} ({shown})"
        if rejected:
            line = MLFLOW_FULL if requirement_name(rejected[0]) == "mlflow" else MLFLOW_SKINNY
            yield Diagnostic.of(
                codes.ENVIRONMENT_MLFLOW_CLIENT_REJECTED,
                f"step '{node.id}': {where} lists {rejected[0]!r}, which lets pip install "
                f"MLflow 2.19 or later: the Azure ML tracking server rejected those "
                f"(azureml-examples PR #3888), so the step's metrics would not reach the "
                f"workspace", hint=f"pin it below 2.19: \"{line}\"", **at_step(node))
        elif clients and "azureml-mlflow" not in {requirement_name(t) for t in lines} | (
                extras_provide(lines)):
            yield Diagnostic.of(
                codes.ENVIRONMENT_MLFLOW_CLIENT_REJECTED,
                f"step '{node.id}': {where} lists {clients[0]!r} but not azureml-mlflow: "
                f"MLflow cannot open the workspace's azureml:// tracking URI without that "
                f"plugin, so the step's metrics would not reach the workspace",
                hint=f"add \"{AZUREML_MLFLOW}\" to the conda file's pip dependencies",
                **at_step(node))
