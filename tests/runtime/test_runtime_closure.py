"""The step runtime's import closure, listed and held: everything a step can import from mlpipe
(each module reachable from ``python -m mlpipe.runtime.step`` and from ``import mlpipe`` in a
component's module, imports inside functions included), the third-party modules those reach,
and the base install (pyproject's ``dependencies``) that provides them. A heavy import that
creeps into the runtime (the store, azure-ai-ml, networkx, ...) fails here."""
from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

from mlpipe.cli.base import AUTHORING_MODULES
from mlpipe.version import __version__

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
#: Where a step starts: the runtime's entry point, the package a component module imports,
#: and the contracts it declares.
ENTRIES = ("mlpipe.runtime.step", "mlpipe", "mlpipe.contracts")

#: Every third-party module the runtime's closure can import, and why it may.
THIRD_PARTY = {
    # the base install (pyproject's dependencies)
    "yaml": "base: pyyaml (MLmodel files, component YAML)",
    "blake3": "base: blake3 (the content digests of a step's outputs)",
    # a contract's validator, imported when it validates: the step's declared needs (MP634)
    "pyarrow": "TabularSchema's validator (tabular extra)",
    "pint": "TabularSchema's units (tabular extra)",
    "mlflow": "MLflowModel's validator; the MLflow metric channel (mlflow extra)",
    # the user's own framework, imported only where the step already uses it
    "torch": "runtime.devices / runtime.distributed, when the step uses torch",
    # never at run time: under TYPE_CHECKING only
    "typing_extensions": "type checkers only",
}
#: Base distribution -> the module it provides.
BASE = {"pyyaml": "yaml", "blake3": "blake3", "click": "click"}
#: Authoring distribution -> its top-level module (the CLI's AUTHORING_MODULES).
AUTHORING = {"networkx": "networkx", "sqlalchemy": "sqlalchemy", "alembic": "alembic",
             "jsonschema": "jsonschema", "psycopg": "psycopg", "pint": "pint",
             "azure-ai-ml": "azure", "rich": "rich", "packaging": "packaging",
             "cryptography": "cryptography"}


def _file(module: str) -> Path | None:
    base = ROOT.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def closure() -> tuple[set[str], dict[str, set[str]]]:
    """The mlpipe modules reachable from ENTRIES (every import statement, at any depth), and
    each third-party top-level module they import, with the modules importing it."""
    seen: set[str] = set()
    third: dict[str, set[str]] = {}
    todo = list(ENTRIES)
    while todo:
        module = todo.pop()
        path = _file(module)
        if module in seen or path is None:
            continue
        seen.add(module)
        parts = module.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top == "mlpipe":
                    todo.append(name)
                elif top not in sys.stdlib_module_names:
                    third.setdefault(top, set()).add(module)
    return seen, third


def _name(requirement: str) -> str:
    return requirement.split(";")[0].split("[")[0].split(">")[0].split("=")[0].split("<")[0] \
        .strip().lower()


def test_the_runtime_imports_only_what_is_listed_here():
    _, third = closure()
    unexpected = {top: sorted(who) for top, who in third.items() if top not in THIRD_PARTY}
    assert not unexpected, f"a third-party import crept into the step runtime: {unexpected}"
    assert set(third) == set(THIRD_PARTY), "THIRD_PARTY lists a module nothing imports now"


def test_the_runtime_reaches_no_authoring_module_of_mlpipe():
    modules, _ = closure()
    authoring = ("mlpipe.checks", "mlpipe.graph", "mlpipe.evidence", "mlpipe.cli",
                 "mlpipe.loader", "mlpipe.backends.local", "mlpipe.drawing")
    crept = sorted(m for m in modules if m.startswith(authoring))
    assert crept == []
    # of the Azure backend only what reads and writes component YAML (the package loads it
    # on first use), none of what talks to Azure ML
    azure = sorted(m for m in modules if m.startswith("mlpipe.backends.azure."))
    # (and the job kinds table the vocabulary names them from: data only, it imports nothing)
    assert azure == ["mlpipe.backends.azure.component_yaml", "mlpipe.backends.azure.jobkinds",
                     "mlpipe.backends.azure.vocabulary", "mlpipe.backends.azure.yamlfile"]


def test_the_base_install_is_the_runtime_and_provides_what_it_always_imports():
    base = {_name(r) for r in PYPROJECT["project"]["dependencies"]}
    assert base == set(BASE)
    always = {t for t, why in THIRD_PARTY.items() if why.startswith("base:")}
    assert always == {BASE[d] for d in base} - {"click"}
    extras = PYPROJECT["project"]["optional-dependencies"]
    assert {_name(r) for r in extras["authoring"]} == set(AUTHORING)
    assert set(AUTHORING.values()) == AUTHORING_MODULES
    # nothing of the authoring side in what a step environment installs for its contracts
    for extra in ("tabular", "mlflow", "azureml"):
        assert not {_name(r) for r in extras[extra]} & (set(AUTHORING) - {"pint"}), extra


def test_a_step_process_imports_nothing_beyond_the_base_install():
    probe = ("import sys, mlpipe, mlpipe.contracts, mlpipe.runtime, mlpipe.runtime.step, "
             "mlpipe.runtime.finish, mlpipe.runtime.record, mlpipe.runtime.observe\n"
             "tops = {m.split('.')[0] for m in sys.modules}\n"
             "print(' '.join(sorted(t for t in tops if t not in sys.stdlib_module_names "
             "and not t.startswith('_'))))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True, cwd=ROOT)
    imported = set(done.stdout.split()) - {"mlpipe", "sitecustomize", "usercustomize"}
    assert imported <= {"yaml", "blake3"}, imported


def test_a_command_of_the_authoring_side_says_what_to_install_where_it_is_missing(tmp_path):
    # azure-ai-ml made unimportable, as where only the runtime is installed
    fit = ROOT / "tests" / "fixtures" / "runtime_install" / "fit.py"
    probe = ("import sys; sys.modules['azure'] = None\n"
             "from mlpipe.cli import main\n"
             f"main(['compile', {str(fit)!r}, '-o', 'out'])\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.splitlines()[-2:] == [
        "error: this command needs azure, which is not installed: this is the step runtime "
        "alone (mlpipe-aml without its authoring side)",
        f"  help: pip install 'mlpipe-aml[authoring]=={__version__}' to check, run and export "
        f"pipelines here"]
    assert not (tmp_path / "out").exists()
