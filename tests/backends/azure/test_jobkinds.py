"""The job kinds table (backends/azure/jobkinds.py): every kind azure-ai-ml knows is read by
an entry or refused with its reason, and the vocabulary's names are the table's."""
from __future__ import annotations

import re

import pytest
from azure.ai.ml.constants import JobType
from azure.ai.ml.constants._component import ControlFlowType, NodeType

from mlpipe.backends.azure import vocabulary
from mlpipe.backends.azure.component_yaml import AZURE_ONLY_COMPONENTS
from mlpipe.backends.azure.jobkinds import KINDS, REFUSED
from mlpipe.errors import LoadError
from mlpipe.loader import load_spec


def _values(constants: type) -> set[str]:
    return {v for k, v in vars(constants).items() if not k.startswith("_") and isinstance(v, str)}


def test_every_kind_azure_ai_ml_knows_is_in_the_table_or_refused_with_a_reason():
    known = _values(JobType) | _values(NodeType) | _values(ControlFlowType)
    assert known - set(KINDS) - set(REFUSED) == set()
    assert not set(KINDS) & set(REFUSED)
    assert all(reason.strip() for reason in REFUSED.values())


def test_the_vocabulary_is_the_tables_face():
    assert vocabulary.JOB_KINDS == {name: kind.display for name, kind in KINDS.items()}
    assert vocabulary.CONTROL_FLOW == ("if_else", "do_while", "parallel_for")
    assert vocabulary.STANDALONE_KINDS == ("command", "sweep", "automl")
    assert set(AZURE_ONLY_COMPONENTS) == {"parallel", "spark", "data_transfer", "import",
                                          "automl", "sweep"}
    assert [k for k, v in KINDS.items() if v.runs_here] == ["command", "pipeline"]


@pytest.mark.parametrize("kind", sorted(REFUSED))
def test_a_refused_kind_is_refused_with_its_reason(tmp_path, kind):
    job = tmp_path / "pipeline.yml"
    job.write_text(f"type: pipeline\njobs:\n  tune:\n    type: {kind}\n")
    with pytest.raises(LoadError, match=rf"job 'tune' has type '{kind}', which mlpipe does "
                                        rf"not read: {re.escape(REFUSED[kind])}"):
        load_spec(str(job))


def test_each_flag_of_the_table_has_its_function_where_the_work_is_done():
    # the table is data (no import circle); a kind's functions sit in the module doing the work
    from mlpipe.backends.azure import importer, nodes

    assert {k for k, v in KINDS.items() if v.standalone} == set(importer.STANDALONE_READERS)
    assert {k for k, v in KINDS.items() if v.checked} == set(importer.KIND_CHECKS)
    assert {k for k, v in KINDS.items() if v.binds_more} == set(nodes.BOUND_VALUES)
