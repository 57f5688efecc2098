"""Semantic contracts: what an artifact means, beyond how its bytes travel.

Contract types subclass :class:`Contract`; a port annotated ``Input[SomeContract]`` (the class,
or a parametrised instance) carries the contract and takes its transport kind from it.
``compatibility`` is the compile-time rule on an edge, ``validate`` the run-time check of a
file or folder. See docs/contracts.md.
"""
from mlpipe.contracts.base import (
                                   KINDS,
                                   Contract,
                                   Difference,
                                   as_instance,
                                   contract_label,
                                   contract_spec,
                                   contract_transport,
                                   is_contract,
                                   version_satisfies,
)
from mlpipe.contracts.compatibility import VERSIONING_RULE, compatibility
from mlpipe.contracts.images import ImageFolder
from mlpipe.contracts.labels import LabelMap
from mlpipe.contracts.metrics import Metric, MetricsReport
from mlpipe.contracts.models import MLflowModel, ModelSignature, Tensor
from mlpipe.contracts.splits import SplitManifest
from mlpipe.contracts.tabular import Column, TabularSchema
from mlpipe.contracts.validation import validate

__all__ = [
    "KINDS", "VERSIONING_RULE", "Column", "Contract", "Difference", "ImageFolder", "LabelMap",
    "MLflowModel", "Metric", "MetricsReport", "ModelSignature", "SplitManifest",
    "TabularSchema", "Tensor", "as_instance", "compatibility", "contract_label",
    "contract_spec", "contract_transport", "is_contract", "validate", "version_satisfies",
]
