"""Hostile Azure ML YAML, each refused with one located line and nothing written or walked:
names that are no names (a port named like a path), ``code: /``, ``inputs:`` as a list, a
document nested 5,000 deep or multiplied by aliases, a FIFO in place of the file."""
from __future__ import annotations

import os
import re
import textwrap

import pytest

from mlpipe.errors import LoadError
from mlpipe.loader import load_spec

PIPELINE = textwrap.dedent("""\
    type: pipeline
    inputs:
      numbers: {type: uri_file, path: ./n.txt}
    jobs:
      double:
        type: command
        command: cp ${{inputs.src}} ${{outputs.out}}
        code: ./src
        environment: azureml:env:1
        inputs:
          src: ${{parent.inputs.numbers}}
        outputs:
          out: {type: uri_file}
    """)


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "run.py").write_text("print(1)\n")
    (tmp_path / "n.txt").write_text("1")
    return tmp_path


def refused(folder, text: str, message: str, hint: str) -> None:
    (folder / "p.yml").write_text(text)
    with pytest.raises(LoadError) as caught:
        load_spec("p.yml")
    assert caught.value.render() == f"{message}\n  help: {hint}"


def test_the_clean_pipeline_loads(folder):
    (folder / "p.yml").write_text(PIPELINE)
    spec, _ = load_spec("p.yml")
    assert [s.name for s in spec.steps] == ["double"]


@pytest.mark.parametrize("old, new, line, field, what", [
    ("      out: {type: uri_file}", "      o/../../../../../ESCAPEDDIR: {type: uri_folder}", 13,
     "jobs.double.outputs.o/../../../../../ESCAPEDDIR", "output name "
     "'o/../../../../../ESCAPEDDIR'"),
    ("  double:", "  ../evil:", 5, "jobs.../evil", "job name '../evil'"),
    ("  numbers: {", "  2numbers: {", 3, "inputs.2numbers", "input name '2numbers'"),
    ("      src: ${{parent", "      s rc: ${{parent", 11, "jobs.double.inputs.s rc",
     "input name 's rc'"),
])
def test_a_name_that_is_no_python_name_is_refused(folder, old, new, line, field, what):
    assert old in PIPELINE
    refused(folder, PIPELINE.replace(old, new),
            f"p.yml:{line}: {field}: {what} is not a name: use letters, digits and _, not "
            f"starting with a digit",
            "rename it (Azure ML requires names like Python identifiers)")
    assert not (folder.parent / "ESCAPEDDIR").exists()


def test_code_at_the_root_of_the_file_system_is_refused_not_walked(folder):
    refused(folder, PIPELINE.replace("code: ./src", "code: /"),
            "p.yml: jobs.double.code: code: / is the root of the file system; its snapshot "
            "would be every file of the machine",
            "give the folder that holds the component's code, e.g. code: ./src")


@pytest.mark.parametrize("key", ["inputs", "outputs"])
def test_a_list_where_a_mapping_of_names_belongs_is_refused(folder, key):
    text = PIPELINE.replace("inputs:\n  numbers: {type: uri_file, path: ./n.txt}\n",
                            "inputs:\n  - numbers\n") if key == "inputs" else \
        PIPELINE + "outputs:\n  - result\n"
    line = 2 if key == "inputs" else 14
    what = "input" if key == "inputs" else "output"
    shown = "['numbers']" if key == "inputs" else "['result']"
    refused(folder, text, f"p.yml:{line}: {key}: is {shown}, not a mapping of {what} names to "
                          f"their entries",
            f"write {key}: as NAME: entry lines (a mapping, not a list)")


@pytest.mark.parametrize("depth", [101, 5000])
def test_a_document_nested_deeper_than_any_job_is_refused(folder, depth):
    refused(folder, "type: pipeline\njobs:\n  a: " + "[" * depth + "]" * depth + "\n",
            "p.yml: p.yml nests collections more than 100 levels deep",
            "give an Azure ML pipeline job YAML; Azure ML job YAML nests a few levels")


def test_a_document_multiplied_by_aliases_is_refused_at_once(folder):
    lines = ["type: pipeline", "a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 10)]
    refused(folder, "\n".join([*lines, "jobs: {}"]) + "\n",
            "p.yml: p.yml expands to more than 1,000,000 values through its YAML aliases",
            "give an Azure ML pipeline job YAML without aliases that multiply it")


def test_a_fifo_in_place_of_the_yaml_is_refused_not_waited_on(folder):
    os.mkfifo(folder / "p.yml")
    with pytest.raises(LoadError, match=re.escape("p.yml: p.yml is not a regular file")):
        load_spec("p.yml")


# found by tests/test_hostile_properties.py: each was a traceback
@pytest.mark.parametrize("text, message, hint", [
    ("type: command\ncommand: echo\noutputs: true\n",
     "p.yml:3: outputs: is True, not a mapping of output names to their entries",
     "write outputs: as NAME: entry lines (a mapping, not a list)"),
    ("type: command\ncommand: echo\ncode: false\n",
     "p.yml: code: code: is False, not a folder path",
     "give the folder that holds the component's code, e.g. code: ./src"),
    ("type: command\ncommand: echo\ninputs: .inf\n",
     "p.yml: p.yml holds .nan or .inf, which is not a number Azure ML or a JSON document can "
     "hold", "give a finite number"),
])
def test_a_command_job_of_the_wrong_shape_is_refused(folder, text, message, hint):
    refused(folder, text, message, hint)


def test_a_type_that_is_a_list_is_refused_and_a_port_named_type_is_not(folder):
    refused(folder, "type: pipeline\njobs: {}\noutputs:\n  type:\n    type: []\n",
            "p.yml: type: is [], not the name of a type",
            "write type: as a name (pipeline, command, uri_folder, integer, ...)")
    (folder / "p.yml").write_text("type: pipeline\njobs: {}\noutputs:\n  type:\n    type: "
                                  "uri_file\n")
    load_spec("p.yml")


def test_a_pipeline_component_job_with_inputs_as_a_list_is_refused(folder):
    (folder / "c.yml").write_text("type: pipeline\njobs: {}\n")
    refused(folder, "type: pipeline\ncomponent: ./c.yml\ninputs:\n  - x\n",
            "p.yml:3: inputs: is ['x'], not a mapping of input names to their entries",
            "write inputs: as NAME: entry lines (a mapping, not a list)")
