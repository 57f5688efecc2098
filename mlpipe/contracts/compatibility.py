"""The compile-time rule on one edge: does the producer's contract satisfy the consumer's?

Pure: contracts in, differences out. The MP4xx checks turn differences into diagnostics.
"""
from __future__ import annotations

from mlpipe.contracts.base import (
    Contract,
    Difference,
    as_instance,
    contract_label,
    parse_version,
    version_satisfies,
)

VERSIONING_RULE = ("versions are MAJOR or MAJOR.MINOR; a consumer requiring M.n accepts a "
                   "producer of the same contract at M.m with m >= n, never another major")


def compatibility(produced: Contract | type[Contract],
                  required: Contract | type[Contract]) -> list[Difference]:
    """Every way ``produced`` fails ``required``; empty when the edge is compatible.

    A contract class stands for any artifact of its kind: as the requirement it asks only for
    the kind; as the producer it promises nothing beyond the kind. Versions are compared
    between two instances of the same name (see ``VERSIONING_RULE``).

    Example:
        >>> compatibility(LabelMap("l", classes=["a", "b"]), LabelMap("l", classes=["b", "a"]))
        [Difference(message="class 'b' is encoded 1 by the producer but 0 by the consumer", ...)]
    """
    have, want = as_instance(produced), as_instance(required)
    if not isinstance(have, type(want)):
        return [Difference(f"{contract_label(produced)} is produced but "
                           f"{contract_label(required)} is required",
                           f"produce a {want.kind}, or add a step that converts "
                           f"{have.kind} to {want.kind}", "contract-kind-mismatch")]
    if isinstance(required, type):
        return []
    same_name = getattr(have, "name", None) == getattr(want, "name", None)
    if not isinstance(produced, type) and same_name:
        if not version_satisfies(have.version, want.version):
            newer = parse_version(have.version) < parse_version(want.version)
            return [Difference(f"{have.label} version {have.version} is produced but version "
                               f"{want.version} is required ({VERSIONING_RULE})",
                               "upgrade the producer to the required version" if newer else
                               "update the consumer to the new major version, or keep "
                               "producing the old one", "contract-version-incompatible")]
    return list(have.differences(want))
