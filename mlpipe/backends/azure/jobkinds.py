"""Azure ML's job kinds, as one table: for each ``type:`` a job can have, how mlpipe imports,
checks, exports and syncs it. Adding a kind is one ``JobKind`` entry plus, where its flags say
so, its function in the table of the module that does that work (``importer.STANDALONE_READERS``,
``importer.KIND_CHECKS``, ``nodes.BOUND_VALUES``; tests/backends/azure/test_jobkinds.py holds
each flag to its entry). A kind azure-ai-ml knows and mlpipe does not read is in ``REFUSED``
with the reason.

Data only: imports nothing of mlpipe, so every module of the Azure backend may read it (the
vocabulary derives its names from here) without an import circle.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: How a job's interface is known: its component's, or what the job binds.
COMPONENT, BINDS, BINDS_UNLESS_REFERENCED = "component", "binds", "binds-unless-referenced"


@dataclass(frozen=True, slots=True)
class JobKind:
    """One ``type:`` of Azure ML job.

    Args:
        name: the ``type:`` as azure-ai-ml spells it.
        display: how messages name a job of it ("a sweep job").
        runs_here: the local backend runs it (else its step is Azure-only, ``display`` why).
        control_flow: a control-flow node (``if_else``, ``do_while``, ``parallel_for``).
        reference: the field naming what it runs (``trial`` for a sweep).
        interface: ``component`` (its component's), ``binds`` (what the job binds, always) or
            ``binds-unless-referenced`` (what it binds when it names no component).
        launched: its ``resources.instance_count`` and ``distribution`` launch its component.
        component_type: a component YAML may have this ``type:`` (``load_component``).
        standalone: a job file may hold it at its top (read by the importer's
            ``STANDALONE_READERS`` entry; else read as a pipeline job).
        binds_more: it binds values beyond ``inputs:`` (``nodes.BOUND_VALUES``' entry).
        checked: one job of it in a pipeline has checks of its own (the importer's
            ``KIND_CHECKS`` entry).
        rest_type: the ``jobType`` the REST API answers for it.
        file_name: the file an export writes it back as (``job.yml``/``pipeline.yml``).
    """

    name: str
    display: str
    runs_here: bool = False
    control_flow: bool = False
    reference: str = "component"
    interface: str = COMPONENT
    launched: bool = False
    component_type: bool = False
    standalone: bool = False
    binds_more: bool = False
    checked: bool = False
    rest_type: str | None = None

    @property
    def file_name(self) -> str:
        return "job.yml" if self.standalone else "pipeline.yml"

    def implied(self, referenced: bool) -> bool:
        """Whether a job of this kind has the interface it binds (``referenced``: it names a
        component)."""
        return self.interface == BINDS or (self.interface == BINDS_UNLESS_REFERENCED
                                           and not referenced)


_KINDS = (
    JobKind("command", "a command job", runs_here=True, launched=True, component_type=True,
            standalone=True, rest_type="Command"),
    JobKind("pipeline", "a pipeline job", runs_here=True, rest_type="Pipeline"),
    JobKind("sweep", "a sweep job", reference="trial", launched=True, component_type=True,
            standalone=True, checked=True),
    JobKind("parallel", "a parallel job", interface=BINDS_UNLESS_REFERENCED,
            component_type=True),
    JobKind("spark", "a Spark job", interface=BINDS_UNLESS_REFERENCED, component_type=True),
    JobKind("automl", "an AutoML job", interface=BINDS, component_type=True,
            standalone=True, binds_more=True),
    JobKind("data_transfer", "a data transfer job", interface=BINDS_UNLESS_REFERENCED,
            component_type=True, binds_more=True),
    JobKind("import", "an import job", interface=BINDS, component_type=True,
            binds_more=True),
    JobKind("if_else", "an if_else control-flow node", control_flow=True, interface=BINDS,
            binds_more=True),
    JobKind("do_while", "a do_while control-flow node", control_flow=True, interface=BINDS,
            binds_more=True),
    JobKind("parallel_for", "a parallel_for control-flow node", control_flow=True,
            interface=BINDS, binds_more=True),
)

#: Every job kind mlpipe reads, by ``type:``, in the order messages list them.
KINDS: dict[str, JobKind] = {k.name: k for k in _KINDS}

#: The kinds azure-ai-ml knows that mlpipe does not read, each with why.
REFUSED: dict[str, str] = {
    "component": "azure-ai-ml's name for a job built from a component in Python; in YAML "
                 "such a job has the component's own type (command, parallel, ...)",
    "base": "azure-ai-ml's abstract base of the job types, never a job's type",
    "finetuning": "a model fine-tuning job runs a model catalog's recipe, not a component "
                  "mlpipe can check or run",
    "distillation": "a model distillation job runs a model catalog's recipe, not a component "
                    "mlpipe can check or run",
    "promptflow_parallel": "azure-ai-ml's internal node for a flow run in parallel; a "
                           "pipeline job names the flow as component: ./flow.dag.yaml",
}


def job_kind_named(kind: Any) -> JobKind | None:
    """The table's entry for ``kind`` (None when mlpipe reads no such kind)."""
    return KINDS.get(kind) if isinstance(kind, str) else None


__all__ = ["BINDS", "BINDS_UNLESS_REFERENCED", "COMPONENT", "KINDS", "REFUSED", "JobKind",
           "job_kind_named"]
