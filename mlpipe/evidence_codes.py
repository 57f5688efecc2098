"""Codes for what the evidence bundle finds about a candidate after its run (MP701-MP704) and
what ``mlpipe evidence --verify`` finds changed (MP711-MP714).

Only the codes live here (outside ``mlpipe.checks``, so ``mlpipe evidence`` need not import the
graph and checks); ``mlpipe.checks`` imports this module so every code is published and
documented. The findings are made by ``mlpipe.evidence.findings`` and ``.verify``.
"""
from mlpipe.diagnostics import Severity, register_code

NO_EVALUATION = register_code(
    "MP701", "candidate-not-evaluated", Severity.ERROR,
    "no evaluation step feeds the candidate (or the evaluation did not read its model)")
EVAL_ON_TRAINING = register_code(
    "MP702", "evaluation-overlaps-training", Severity.ERROR,
    "the evaluation population overlaps the population the model was trained on")
GLOBAL_FROM_FEW_RANKS = register_code(
    "MP703", "global-metric-from-too-few-ranks", Severity.ERROR,
    "a metric labelled global came from one rank, or was aggregated over fewer ranks than "
    "the world size")
REUSE_WITHOUT_ORIGIN = register_code(
    "MP704", "reused-without-executed-origin", Severity.ERROR,
    "a step was reused but no executed run of it is in this store")

ARTIFACT_CHANGED = register_code(
    "MP711", "artifact-changed", Severity.ERROR,
    "a file or folder the bundle names no longer has its recorded digest")
ARTIFACT_MISSING = register_code(
    "MP712", "artifact-missing", Severity.ERROR,
    "a file or folder the bundle names is no longer at its location")
STORE_CHANGED = register_code(
    "MP713", "evidence-changed-in-store", Severity.ERROR,
    "the store no longer holds what the sealed bundle says")
BUNDLE_TAMPERED = register_code(
    "MP714", "bundle-bytes-changed", Severity.ERROR,
    "a sealed bundle's bytes no longer match its digest, or its chain is broken")
