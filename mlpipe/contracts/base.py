"""The base every contract type derives from, and how a port reads a contract's facts.

Knows nothing of specs, graphs or backends.
"""
from __future__ import annotations

from typing import Any, ClassVar

from mlpipe.artifacts import AssetType


class Contract:
    """A versioned statement of what an artifact means.

    Subclasses set ``kind`` (kebab-case name of the contract type) and ``transport`` (the
    Azure ML type the artifact travels as) and describe their parameters in :meth:`spec`.
    A port may be annotated with the class itself (any artifact of that kind) or with an
    instance (that exact parametrisation).

    Example:
        >>> class Report(Contract):
        ...     kind = "report"
        ...     transport = AssetType.URI_FILE
    """

    kind: ClassVar[str] = "contract"
    transport: ClassVar[AssetType] = AssetType.URI_FOLDER
    version: str = "1"

    def spec(self) -> dict[str, Any]:
        """Canonical, JSON-able description of this contract; it goes into spec digests."""
        fields = {k: v for k, v in vars(self).items() if not k.startswith("_")}
        return {"kind": self.kind, "version": str(self.version), **fields}

    @property
    def label(self) -> str:
        name = getattr(self, "name", None)
        return f"{self.kind}:{name}" if name else self.kind

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.spec()!r})"


def _is_contract_class(value: object) -> bool:
    return isinstance(value, type) and issubclass(value, Contract)


def contract_spec(contract: Contract | type[Contract]) -> dict[str, Any]:
    """The digestable description of a contract given as a class or an instance."""
    if _is_contract_class(contract):
        return {"kind": contract.kind, "version": None, "any": True}
    return contract.spec()


def contract_label(contract: Contract | type[Contract]) -> str:
    """A short name for messages: ``label-map:defect-labels`` or ``image-folder``."""
    if _is_contract_class(contract):
        return contract.kind
    return contract.label


def contract_transport(contract: Contract | type[Contract]) -> AssetType:
    return contract.transport


def is_contract(value: object) -> bool:
    """Whether ``value`` is a contract class or instance."""
    return isinstance(value, Contract) or _is_contract_class(value)
