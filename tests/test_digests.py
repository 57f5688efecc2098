"""Digests: stable across processes, changed by any declared field or code change, kept by
docstring and comment edits."""
import dataclasses
import json
import os
import subprocess
import sys
import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mlpipe import Compute, Environment, Input, Mpi, Output, Param, PyTorch, TensorFlow, component
from mlpipe.digests import digest_of
from mlpipe.spec import Origin

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PROBE = """
import json, sys
sys.path[:0] = {paths!r}
import importlib
out = {{}}
for target in {targets!r}:
    module, _, attr = target.partition(":")
    obj = getattr(importlib.import_module(module), attr)
    spec = obj.spec if hasattr(obj, "spec") else obj
    out[target] = [spec.digest, getattr(spec, "code_digest", None)]
print(json.dumps(out))
"""


def digests_in_subprocess(targets, paths, seed="random"):
    env = {**os.environ, "PYTHONHASHSEED": seed}
    code = PROBE.format(paths=list(paths), targets=list(targets))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         cwd=ROOT, check=True)
    return json.loads(out.stdout)


@pytest.mark.slow
def test_the_same_definitions_give_the_same_digests_in_any_process():
    targets = ["pipelines.defect_classifier:defect_classifier", "components.defect:train",
               "fixtures.checks.mp101:bad", "fixtures.checks.mp105:bad"]
    paths = [ROOT, os.path.join(ROOT, "tests")]
    first = digests_in_subprocess(targets, paths, seed="1")
    second = digests_in_subprocess(targets, paths, seed="2")
    assert first == second
    import importlib
    for target in targets:
        module, _, attr = target.partition(":")
        obj = getattr(importlib.import_module(module), attr)
        spec = obj.spec if hasattr(obj, "spec") else obj
        assert first[target][0] == spec.digest


BASE = '''
"""Module docstring."""
from mlpipe import Input, Output, Param, component
from helpers import scale

FACTOR = 2


def helper(x):
    return x * FACTOR


def unrelated():
    return "not used by work"


@component(version="1")
def work(data: Input["uri_file"], out: Output["uri_file"], n: Param[int] = 1):
    """Does the work."""
    # a comment
    return helper(scale(n))
'''

HELPERS = '''
def scale(n):
    return n + 1
'''


def _digest_after(tmp_path, source: str, helpers: str = HELPERS) -> tuple[str, str]:
    (tmp_path / "mod.py").write_text(textwrap.dedent(source))
    (tmp_path / "helpers.py").write_text(textwrap.dedent(helpers))
    out = digests_in_subprocess(["mod:work"], [str(tmp_path)])
    return tuple(out["mod:work"])


EDITS_THAT_KEEP = {
    "docstring": lambda s: s.replace('"""Does the work."""', '"""Does the work, now documented."""'),
    "comment": lambda s: s.replace("# a comment", "# another comment\n    # and one more"),
    "module docstring": lambda s: s.replace("Module docstring.", "Changed."),
    "unrelated function": lambda s: s.replace('"not used by work"', '"changed"'),
    "blank lines": lambda s: s.replace("FACTOR = 2\n", "\n\nFACTOR = 2\n\n"),
}

EDITS_THAT_CHANGE = {
    "body": lambda s: s.replace("return helper(scale(n))", "return helper(scale(n)) + 1"),
    "used helper": lambda s: s.replace("return x * FACTOR", "return x * FACTOR * 1"),
    "used constant": lambda s: s.replace("FACTOR = 2", "FACTOR = 3"),
    "version": lambda s: s.replace('version="1"', 'version="2"'),
    "param default": lambda s: s.replace("n: Param[int] = 1", "n: Param[int] = 2"),
    "port kind": lambda s: s.replace('out: Output["uri_file"]', 'out: Output["uri_folder"]'),
}


@pytest.mark.slow
def test_code_digest_keeps_doc_edits_and_changes_with_code(tmp_path):
    base = _digest_after(tmp_path, BASE)
    for name, edit in EDITS_THAT_KEEP.items():
        assert _digest_after(tmp_path, edit(BASE)) == base, name
    for name, edit in EDITS_THAT_CHANGE.items():
        assert _digest_after(tmp_path, edit(BASE))[0] != base[0], name
    changed_helpers = _digest_after(tmp_path, BASE, HELPERS.replace("n + 1", "n + 2"))
    assert changed_helpers[1] != base[1], "a change in an imported local module"
    commented_helpers = _digest_after(tmp_path, BASE, "# helpers\n" + HELPERS)
    assert commented_helpers == base


def work_fn(data: Input["uri_file"], out: Output["uri_file"], n: Param[int, 0:100] = 1):
    return data


OPTIONS = st.fixed_dictionaries({
    "version": st.sampled_from(["1", "1.0.0", "2"]),
    "description": st.none() | st.sampled_from(["a", "b"]),
    "environment": st.none() | st.builds(Environment, st.sampled_from(["e1", "e2"]),
                                         version=st.sampled_from(["1", "2"])),
    "compute": st.none() | st.builds(Compute, st.sampled_from(["cpu", "gpu"]),
                                     sku=st.none() | st.just("Standard_NC24rs_v3")),
    "instances": st.integers(1, 3),
    "distribution": st.none() | st.builds(PyTorch, st.none() | st.integers(1, 4))
                    | st.builds(TensorFlow, st.none() | st.integers(1, 3), st.integers(0, 1))
                    | st.builds(Mpi, st.integers(1, 4)),
    "environment_variables": st.dictionaries(st.sampled_from(["A", "B"]), st.sampled_from(["0", "1"])),
    "reuse": st.booleans(),
    "reads": st.lists(st.sampled_from(["/data/a.csv", "~/models"]), unique=True, max_size=2),
})


@settings(max_examples=60, deadline=None)
@given(OPTIONS, OPTIONS)
def test_digest_equal_exactly_when_the_declaration_is_equal(a, b):
    da = component(**a)(work_fn).spec.digest
    db = component(**b)(work_fn).spec.digest
    assert (da == db) == (a == b)


SPEC_CHANGES = {
    "name": "other", "version": "9", "display_name": "X", "description": "changed",
    "inputs": (), "outputs": (), "params": (), "code_digest": "sha256:" + "0" * 64,
    "environment": Environment("x", version="1"), "compute": Compute("c"), "instances": 5,
    "distribution": Mpi(2), "environment_variables": (("K", "V"),), "reuse": False,
    "command": "python x.py", "kind": "parallel", "azure_only": "a parallel job",
    "reads": ("/data/lookup.csv",),
}


def test_every_declared_field_is_digested_and_nothing_else():
    spec = component(work_fn).spec
    digested = {f.name for f in dataclasses.fields(spec) if f.compare}
    assert digested == set(SPEC_CHANGES)
    for name, value in SPEC_CHANGES.items():
        assert dataclasses.replace(spec, **{name: value}).digest != spec.digest, name
    moved = dataclasses.replace(spec, doc="other doc", location=None, function="m:f")
    assert moved.digest == spec.digest
    # read from YAML: the document it was read from is digested, not the file's place
    read = dataclasses.replace(spec, origin=Origin.of("/a/x.yml", {"type": "command"}))
    assert read.digest != spec.digest
    assert dataclasses.replace(read, origin=Origin.of("/b/x.yml", {"type": "command"})
                               ).digest == read.digest


def test_digest_is_sha256_of_canonical_json():
    assert digest_of({"b": 1, "a": [1, "é"]}) == digest_of({"a": [1, "é"], "b": 1})
    import hashlib
    assert digest_of({"a": 1}) == "sha256:" + hashlib.sha256(b'{"a":1}').hexdigest()


GUARDED = '''
import sys
from mlpipe import Input, Output, component
from stars import *

if sys.version_info >= (3, 8):
    SCALE = 2
else:
    SCALE = 3

try:
    OFFSET = 1
except ImportError:
    OFFSET = 0


@component
def work(data: Input["uri_file"], out: Output["uri_file"]):
    from helpers import scale
    return scale(SCALE + OFFSET + starred())
'''

STARS = '''
def starred():
    return 7
'''


def _guarded(tmp_path, source=GUARDED, stars=STARS, helpers=HELPERS) -> str:
    (tmp_path / "stars.py").write_text(stars)
    return _digest_after(tmp_path, source, helpers)[1]


@pytest.mark.slow
def test_code_digest_follows_guarded_names_star_imports_and_imports_in_the_body(tmp_path):
    """Found in review: these changes used to keep the digest, so stale outputs were reused."""
    base = _guarded(tmp_path)
    assert _guarded(tmp_path, GUARDED.replace("SCALE = 2", "SCALE = 4")) != base
    assert _guarded(tmp_path, GUARDED.replace("OFFSET = 1", "OFFSET = 5")) != base
    assert _guarded(tmp_path, stars=STARS.replace("7", "8")) != base
    assert _guarded(tmp_path, helpers=HELPERS.replace("n + 1", "n + 2")) != base
    assert _guarded(tmp_path, stars="# a comment\n" + STARS) == base
