"""Semantic contracts: what an artifact means, beyond how its bytes travel.

Contract types subclass :class:`Contract`; a port annotated ``Input[SomeContract]`` (the class,
or a parametrised instance) carries the contract and takes its transport kind from it.
"""
from mlpipe.contracts.base import Contract, contract_label, contract_spec, contract_transport

__all__ = ["Contract", "contract_label", "contract_spec", "contract_transport"]
