"""Validation imports azure-ai-ml without its package ``__init__`` (``validate.loaders``): the
verdicts are azure-ai-ml's own either way, and the rest of the process sees the whole package.

Each case runs in a fresh interpreter: what it measures is what a process imports first.
"""
from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]

#: Loads and validates every file of the corpus's MANIFEST.tsv as `mlpipe compile`'s validation
#: does ("whole": after importing the package as usual), and prints each verdict or refusal.
VERDICTS = r'''
import csv, json, pathlib, sys
corpus = pathlib.Path(sys.argv[2])
if sys.argv[1] == "whole":
    import azure.ai.ml
from mlpipe.backends.azure.validate import loaders
load_job, _ = loaders()
verdicts = {}
for row in csv.DictReader((corpus / "MANIFEST.tsv").open(encoding="utf-8"), delimiter="\t"):
    try:
        job = load_job(corpus / row["path"])
        validate = getattr(job, "_validate", None)
        result = validate() if validate else None
        verdicts[row["path"]] = None if result is None else [
            result.passed, sorted(map(str, result._to_dict().get("errors", [])))]
    except Exception as exc:
        verdicts[row["path"]] = [type(exc).__name__, str(exc)]
print(json.dumps(verdicts, sort_keys=True))
'''


def _python(code: str, *args: str) -> str:
    # one hash seed: marshmallow lists a document's unknown fields in a set's order
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          cwd=ROOT, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_the_loaders_leave_out_the_client_and_the_package_is_whole_when_asked():
    out = _python(
        "import sys\n"
        "from mlpipe.backends.azure.validate import loaders\n"
        "load_job, load_component = loaders()\n"
        "print('azure.ai.ml._ml_client' in sys.modules, 'azure.ai.ml.operations' in sys.modules)\n"
        "import azure.ai.ml\n"
        "from azure.ai.ml import MLClient, load_job as whole\n"
        "print('azure.ai.ml._ml_client' in sys.modules, whole is load_job,\n"
        "      azure.ai.ml.VERSION == azure.ai.ml._version.VERSION)\n")
    assert out.split() == ["False", "False", "True", "True", "True"]


def test_the_package_already_imported_whole_is_kept():
    out = _python("import sys, azure.ai.ml\n"
                  "from mlpipe.backends.azure.validate import loaders\n"
                  "before = sys.modules['azure.ai.ml']\n"
                  "loaders()\n"
                  "print(sys.modules['azure.ai.ml'] is before, hasattr(before, 'MLClient'))\n")
    assert out.split() == ["True", "True"]


def test_what_the_package_init_sets_quiet_stays_quiet():
    """A name only the package's __init__ defines (its ``module_logger``) runs that __init__,
    which sets azure-ai-ml's logger to INFO: quieted again; a re-exported name runs nothing."""
    out = _python("import logging\n"
                  "from mlpipe.backends.azure.validate import loaders\n"
                  "loaders()\n"
                  "import azure.ai.ml\n"
                  "from azure.ai.ml import Input\n"
                  "print('module_logger' in vars(azure.ai.ml))\n"
                  "azure.ai.ml.module_logger\n"
                  "print('module_logger' in vars(azure.ai.ml),\n"
                  "      logging.getLogger('azure.ai.ml').level == logging.ERROR)\n")
    assert out.split() == ["False", "True", "True"]


@pytest.mark.slow
def test_every_corpus_file_gets_the_same_verdict_as_with_the_whole_package():
    from backends.azure.test_corpus import CORPUS  # ../shared/corpus, read in place

    if CORPUS is None:
        pytest.skip("the third-party corpus is absent: ../shared/corpus/azure-ai-ml-test-configs")
    light = json.loads(_python(VERDICTS, "light", str(CORPUS)))
    whole = json.loads(_python(VERDICTS, "whole", str(CORPUS)))
    assert len(light) >= 100
    assert sum(v is not None and v[0] is True for v in light.values()) >= 10  # some pass
    assert any(v is not None and v[0] is False for v in light.values())  # some are rejected
    assert light == whole


def test_a_deferred_package_gives_its_reexports_and_its_submodules_and_runs_its_init_last(
        tmp_path):
    """``defer_init`` on a package of one's own: what its ``__init__`` imports from a submodule
    (``from .sub import X as Y``, ``from . import sub``) is that submodule's object, without the
    ``__init__`` running; a name the ``__init__`` defines itself runs it, once."""
    package = tmp_path / "deferred_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("from . import sub\nfrom .sub import X as Y\n"
                                         "RUNS = []\nRUNS.append(1)\n")
    (package / "sub.py").write_text("X = 42\n")
    out = _python("import sys\n"
                  f"sys.path.insert(0, {str(tmp_path)!r})\n"
                  "from mlpipe.backends.azure.validate import defer_init\n"
                  "defer_init('deferred_pkg')\n"
                  "import deferred_pkg\n"
                  "from deferred_pkg import Y\n"
                  "print(deferred_pkg.sub.X, Y, 'RUNS' in vars(deferred_pkg))\n"
                  "print(deferred_pkg.RUNS, deferred_pkg.RUNS)\n")
    assert out.splitlines() == ["42 42 False", "[1] [1]"]
