"""``mlpipe promote`` as one library call: gate a candidate on its recorded decision, claim
the promotion, register the model with its card, ML-BOM and signature, record and seal it.

Prints nothing; which registry is one argument (an MLflow URI, or an Azure ML workspace's
service the caller makes).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Promoted:
    """What ``promote`` did: the gate that passed, the registration and its record."""

    passed: Any        # evidence.promotion's gate result
    registered: Any    # the registry's Registration
    done: Any          # evidence.promotion.record's result
    taken_from: str | None   # the promotion this one took over, left by a killed promote

    def document(self) -> dict[str, Any]:
        """``promote --format json``'s document."""
        passed, reg = self.passed, self.registered
        return {"candidate": self.done.candidate, "registry": reg.registry,
                "target": reg.target, "name": reg.name, "version": reg.version,
                "uri": reg.uri, "alias": reg.alias, "new": reg.new,
                "bundle": passed.cited, "decision": passed.decision_digest,
                "sealed": self.done.sealed, "tags": {**passed.tags, **reg.extra_tags}}


def promote(candidate: str, *, name: str, registry: str = "mlflow", alias: str | None = None,
            policy_file: str | None = None, tracking_uri: str | None = None,
            by: str | None = None, workspace_service: Callable[[], Any] | None = None
            ) -> Promoted:
    """Register ``candidate``'s model into a model registry, gated on its recorded decision.

    Args:
        candidate: the candidate's id (or a unique prefix).
        name: the registered model's name.
        registry: ``mlflow`` (an MLflow Model Registry) or ``azure`` (a workspace's models).
        alias: an MLflow alias to point at the version.
        policy_file: the policy the promotion requires (default: the one the decision cites).
        tracking_uri: the MLflow tracking URI (default ``MLFLOW_TRACKING_URI``).
        by: who promotes (recorded).
        workspace_service: makes the Azure ML service of the workspace (``azure``).

    Returns:
        The promotion: gate, registration and record.

    Raises:
        PromotionRefused: MP750-MP753 (no decision, rejected, stale, policy not met).
        UsageError: an alias for an Azure ML registry, a bad policy file.

    Example:
        >>> promote("c-0a1b2", name="defect-classifier").registered.version
        '1'
    """
    import tempfile
    from pathlib import Path

    from mlpipe.errors import UsageError
    from mlpipe.evidence.qualification.claims import claimed
    from mlpipe.evidence.qualification.mlflowregistry import tracking_uri as configured_uri
    from mlpipe.evidence.qualification.promotion import gate, record, signature_bytes
    from mlpipe.evidence.reports.card import write_card
    from mlpipe.evidence.storage.config import locate

    if registry == "azure" and alias is not None:
        raise UsageError("--alias is for an MLflow registry: an Azure ML workspace's model "
                         "versions have no aliases", hint="promote without --alias; deploy "
                         "the version by its azureml:NAME:VERSION")
    policy = None
    if policy_file is not None:
        from mlpipe.evidence.qualification.policy import load_policy

        policy = load_policy(policy_file)
    url = locate().url
    passed = gate(url, candidate, policy)
    service = None
    if registry == "azure":
        if workspace_service is None:
            raise ValueError("promote to Azure ML needs workspace_service")
        service = workspace_service()
    target = _target(service) if service is not None else configured_uri(tracking_uri)
    # claimed before the registry is written: a concurrent promote of the candidate waits
    # for this one, and one killed midway is taken over (its version found by its tags)
    with claimed(url, passed.candidate, registry, target, name) as claim, \
            tempfile.TemporaryDirectory(prefix="mlpipe-card-") as tmp:
        card = write_card(url, passed.candidate, f"{tmp}/model-card.md")
        attachments = {"model_card": str(card.markdown), "ml_bom": str(card.bom)}
        signature = signature_bytes(url, passed.candidate)
        if signature is not None:
            Path(tmp, "model.sig").write_bytes(signature)
            attachments["model_signature"] = f"{tmp}/model.sig"
        reg = _register(service, target, name, passed, alias, attachments,
                        card.markdown.read_text(encoding="utf-8"))
        done = record(url, passed, reg, by=by, claim=claim)
    return Promoted(passed, reg, done, claim.taken_from)


def _target(service: Any) -> str:
    from mlpipe.backends.azure import models as azure_models

    return azure_models.target(service)


def _register(service: Any, target: str, name: str, passed: Any, alias: str | None,
              attachments: dict[str, str], description: str) -> Any:
    """The model registered (or found registered) in the Azure ML workspace of ``service``,
    or, without one, the MLflow registry at ``target``."""
    if service is not None:
        from mlpipe.backends.azure import models as azure_models

        return azure_models.register(service, name, passed.model_path, passed.tags,
                                     description=description)
    from mlpipe.evidence.qualification.mlflowregistry import register

    return register(target, name, passed.model_path, passed.tags, alias=alias,
                    attachments=attachments, description=description)


__all__ = ["Promoted", "promote"]
