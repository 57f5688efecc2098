"""The code digest reads source without importing what a body imports, and its AST text is
the same as before it stopped re-parsing (so no digest, and no reuse, changed)."""
import ast
import pathlib
import subprocess
import sys
import sysconfig
import textwrap

import pytest

from mlpipe import source
from mlpipe.modules import module_file

ROOT = pathlib.Path(__file__).resolve().parents[1]
STDLIB = pathlib.Path(sysconfig.get_path("stdlib"))


def _strip(node):
    for sub in ast.walk(node):
        body = getattr(sub, "body", None)
        if (isinstance(sub, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                and body and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            sub.body = body[1:] or [ast.Pass()]
    return node


def _reparsed_dump(node):
    # the dump the code digest used to take: a fresh parse of the unparsed node, stripped
    return ast.dump(_strip(ast.parse(ast.unparse(node))), annotate_fields=False,
                    include_attributes=False)


FILES = sorted([*ROOT.glob("mlpipe/**/*.py"), *ROOT.glob("components/*.py"),
                *ROOT.glob("tests/fixtures/**/*.py"),
                *(STDLIB / name for name in ("ast.py", "dataclasses.py", "enum.py")),
                *(STDLIB / "json").glob("*.py")])


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(p.parents[1])))
def test_dump_equals_the_reparsed_dump(path):
    tree = ast.parse(path.read_bytes())
    before = ast.dump(tree, include_attributes=True)
    nodes = [tree, *tree.body, *(n for n in ast.walk(tree) if isinstance(
        n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)))]
    for node in nodes:
        assert source._dump(node) == _reparsed_dump(node)
    assert ast.dump(tree, include_attributes=True) == before  # the cached tree is left as it was


PACKAGE = {
    "heavy/__init__.py": "raise RuntimeError('heavy was imported')\n",
    "heavy/distributed/__init__.py": "raise RuntimeError('heavy.distributed was imported')\n",
    "heavy/distributed/ops.py": "raise RuntimeError('heavy.distributed.ops was imported')\n",
    "localpkg/__init__.py": "raise RuntimeError('localpkg was imported')\n",
    "localpkg/helpers.py": "def helper():\n    return 1\n",
    "steps.py": textwrap.dedent('''
        def body():
            import heavy.distributed
            from heavy.distributed import ops
            from localpkg import helpers
            return helpers.helper(), heavy.distributed, ops
    '''),
}


@pytest.fixture
def project(tmp_path, monkeypatch):
    for rel, text in PACKAGE.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in [m for m in sys.modules if m.split(".")[0] in ("heavy", "localpkg", "steps")]:
        del sys.modules[name]


def test_module_file_imports_neither_the_module_nor_its_parents(project):
    assert module_file("heavy.distributed.ops") == (str(project / "heavy/distributed/ops.py"),
                                                    False)
    assert module_file("heavy.distributed") == (
        str(project / "heavy/distributed/__init__.py"), True)
    assert module_file("heavy.nothing") == (None, False)
    assert module_file("heavy.distributed.ops.deeper") == (None, False)  # ops is no package
    assert module_file("no_such_top_level_module") == (None, False)
    assert not [m for m in sys.modules if m.split(".")[0] == "heavy"]


def test_module_file_inside_nested_namespace_packages_none_of_them_imported(tmp_path,
                                                                         monkeypatch):
    # azure.ai.ml's shape: azure and azure.ai are namespace packages (no __init__), here in two
    # portions on two path entries; the finder's namespace path needs its parent imported
    for root, rel in (("a", "nsouter/nsinner/lib/__init__.py"), ("b", "nsouter/nsinner/other.py")):
        (tmp_path / root / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / root / rel).write_text("raise RuntimeError('imported')\n")
        monkeypatch.syspath_prepend(str(tmp_path / root))
    assert module_file("nsouter.nsinner.lib") == (
        str(tmp_path / "a/nsouter/nsinner/lib/__init__.py"), True)
    assert module_file("nsouter.nsinner.other") == (
        str(tmp_path / "b/nsouter/nsinner/other.py"), False)
    assert module_file("nsouter.nsinner") == ("", True)
    assert module_file("nsouter.nsinner.missing") == (None, False)
    assert module_file("nsouter.nowhere.lib") == (None, False)
    assert not [m for m in sys.modules if m.split(".")[0] == "nsouter"]


def test_module_file_of_imported_and_blocked_modules(monkeypatch):
    import json.decoder

    assert module_file("json.decoder") == (json.decoder.__file__, False)
    assert module_file("json") == (json.__file__, True)
    monkeypatch.setitem(sys.modules, "json.scanner", None)  # imports of it are blocked
    assert module_file("json.scanner") == (None, False)
    assert module_file("sys") == ("", False)  # built in: no file


def test_code_digest_follows_a_local_package_without_importing_anything(project):
    import steps

    digest = source.code_digest(steps.body)
    assert digest.startswith("sha256:")
    assert not [m for m in sys.modules if m.split(".")[0] in ("heavy", "localpkg")]
    (project / "localpkg/helpers.py").write_text("def helper():\n    return 2\n")
    assert source.code_digest(steps.body) != digest  # the local module counts, unimported


CHECK_PROBE = """
import json, sys
from click.testing import CliRunner
import mlpipe.cli
for target in sys.argv[1:]:
    result = CliRunner().invoke(mlpipe.cli.main, ["check", target])
    assert result.exit_code == 0, result.output
print(json.dumps(sorted({m.split(".")[0] for m in sys.modules} & {
    "torch", "networkx", "yaml", "sqlalchemy", "jsonschema", "pint", "numpy", "azure"})))
"""


def test_check_imports_no_library_of_a_step_body():
    # train_cnn's body imports torch.distributed: finding its file must not import torch. PyYAML
    # is check's own: the example declares its registered environments in environments/*.yml,
    # which MP631-MP635 read (docs/azure.md, "A registered environment the project declares").
    out = subprocess.run([sys.executable, "-c", CHECK_PROBE, "pipelines/defect_classifier.py",
                          "pipelines/defect_classifier_ddp.py"], cwd=ROOT,
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == '["yaml"]'
