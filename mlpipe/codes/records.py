"""The codes of what a run left behind: Azure ML evidence, bundle findings and verification,
the team store, signatures and trust, promotion, reproducibility, run diagnosis and hostile
input (MP660-MP999). In code order; ``mlpipe.codes`` is their face."""
from __future__ import annotations

from mlpipe.codes.book import publish as _code
from mlpipe.diagnostics import Severity

ERROR, WARNING, INFO = Severity.ERROR, Severity.WARNING, Severity.INFO

# --- MP660-MP679: evidence of what lives only on Azure ML (mlpipe.evidence.records.findings,
#     mlpipe.evidence.bundles.verify)
CONTENT_UNKNOWN = _code(
    "MP660", "content-unknown", ERROR,
    "The candidate's model or evaluation report has no content digest: only a reference to "
    "where its bytes are was recorded.")
ARTIFACT_NOT_REHASHED = _code(
    "MP661", "artifact-not-rehashed", INFO,
    "An artifact the bundle names lives only in remote storage (an Azure ML output) and was "
    "not downloaded and re-hashed by this verification.")

# --- MP700-MP709: findings of the evidence bundle (mlpipe.evidence.records.findings); MP705-MP709:
#     criteria of a qualification policy (mlpipe.evidence.qualification.policy)
CANDIDATE_NOT_EVALUATED = _code(
    "MP701", "candidate-not-evaluated", ERROR,
    "No evaluation step feeds the candidate (or the evaluation did not read its model).")
EVALUATION_OVERLAPS_TRAINING = _code(
    "MP702", "evaluation-overlaps-training", ERROR,
    "The evaluation population overlaps the population the model was trained on.")
GLOBAL_METRIC_FROM_TOO_FEW_RANKS = _code(
    "MP703", "global-metric-from-too-few-ranks", ERROR,
    "A metric labelled global came from one rank, or was aggregated over fewer ranks than the "
    "world size.")
REUSED_WITHOUT_EXECUTED_ORIGIN = _code(
    "MP704", "reused-without-executed-origin", ERROR,
    "A step was reused but no executed run of it is in this store.")
POLICY_METRIC_MISSING = _code(
    "MP705", "policy-metric-missing", ERROR,
    "The qualification policy requires a global metric the candidate's evaluation does not have.")
POLICY_THRESHOLD_NOT_MET = _code(
    "MP706", "policy-threshold-not-met", ERROR,
    "A global metric the qualification policy requires is on the wrong side of its threshold.")
POLICY_POPULATION_MISMATCH = _code(
    "MP707", "policy-population-mismatch", ERROR,
    "A metric the qualification policy requires was measured on another population than the "
    "one it names.")
POLICY_FINDING_PRESENT = _code(
    "MP708", "policy-finding-present", ERROR,
    "The bundle has a finding the qualification policy requires to be absent.")
POLICY_VERIFICATION_FAILED = _code(
    "MP709", "policy-verification-failed", ERROR,
    "The qualification policy requires --verify to pass, and it did not.")

# --- MP710-MP719: verification of a sealed bundle (evidence.bundles.verify); MP715-MP716, MP718:
#     recorded decisions (evidence.review, evidence.commitment); MP717: provenance (findings)
ARTIFACT_CHANGED = _code(
    "MP711", "artifact-changed", ERROR,
    "A file or folder the bundle names no longer has its recorded digest.")
ARTIFACT_MISSING = _code(
    "MP712", "artifact-missing", ERROR,
    "A file or folder the bundle names is no longer at its location.")
EVIDENCE_CHANGED_IN_STORE = _code(
    "MP713", "evidence-changed-in-store", ERROR,
    "The store no longer holds what the sealed bundle says.")
BUNDLE_BYTES_CHANGED = _code(
    "MP714", "bundle-bytes-changed", ERROR,
    "A sealed bundle's bytes no longer match its digest, or its chain is broken.")
DECISION_ON_STALE_BUNDLE = _code(
    "MP715", "decision-on-stale-bundle", ERROR,
    "A review decision cites a bundle the store no longer matches, or not the newest one.")
ACCEPTANCE_REFUSED = _code(
    "MP716", "acceptance-refused", ERROR,
    "A candidate with an error-severity finding, or failing the given policy, cannot be accepted.")
CODE_NOT_COMMITTED = _code("MP717", "code-not-committed", WARNING, (
    "A file the pipeline loaded was modified or untracked in git when the run started."))
POLICY_DEVIATION_UNRECORDED = _code("MP718", "policy-deviation-unrecorded", ERROR, (
    "A policy other than the one the run committed to, without a recorded deviation."))

# --- MP720-MP729: the team store (mlpipe.evidence.bundles.verify, mlpipe.evidence.storage.roots)
BUNDLE_CHAIN_MISSING = _code(
    "MP720", "bundle-chain-missing", ERROR,
    "A candidate has no sealed bundle to verify against: never sealed, or its bundles removed.")

# --- MP730-MP749: signatures and the trust policy (evidence.signatures: trust, signing)
BUNDLE_UNSIGNED = _code(
    "MP730", "bundle-unsigned", ERROR,
    "A sealed bundle has no DSSE envelope: it was sealed without a signing key.")
BUNDLE_SIGNATURE_INVALID = _code(
    "MP731", "bundle-signature-invalid", ERROR,
    "A sealed bundle's signature does not verify, or its envelope signs other bytes.")
BUNDLE_SIGNER_UNTRUSTED = _code(
    "MP732", "bundle-signer-untrusted", ERROR,
    "A sealed bundle is signed by a key the trust policy does not let seal.")
DECISION_UNSIGNED = _code(
    "MP733", "decision-unsigned", ERROR,
    "A recorded decision is not signed, so its reviewer is free text, not an identity.")
DECISION_SIGNATURE_INVALID = _code(
    "MP734", "decision-signature-invalid", ERROR,
    "A decision's signature does not verify, or its signed statement disagrees with the store.")
DECISION_SIGNER_UNTRUSTED = _code(
    "MP735", "decision-signer-untrusted", ERROR,
    "A decision is signed by a key the trust policy does not let decide.")
DECIDER_IS_SUBMITTER = _code(
    "MP736", "decider-is-submitter", ERROR,
    "A decision is signed by the identity that submitted the candidate's run.")
DECISION_CITES_UNKNOWN_BUNDLE = _code(
    "MP737", "decision-cites-unknown-bundle", ERROR,
    "A decision cites a bundle digest that is not in the candidate's sealed chain.")
MODEL_SIGNATURE_INVALID = _code(
    "MP738", "model-signature-invalid", ERROR,
    "The model signature the bundle names does not verify, or its manifest is not the files.")
MODEL_SIGNER_UNTRUSTED = _code(
    "MP739", "model-signer-untrusted", ERROR,
    "The model signature the bundle names is by a key the trust policy does not let seal.")
PROMOTION_UNRECORDED = _code("MP741", "promotion-unrecorded", ERROR, "A registered version "
                             "is a candidate's model, but no promotion of it is recorded.")

# --- MP750-MP769: promotion into a model registry and tracing back from it
#     (mlpipe.evidence.qualification.promotion, mlpipe.evidence.qualification.trace)
PROMOTION_WITHOUT_DECISION = _code(
    "MP750", "promotion-without-decision", ERROR,
    "A candidate is promoted into a model registry with no recorded decision on it.")
PROMOTION_OF_REJECTED_CANDIDATE = _code(
    "MP751", "promotion-of-rejected-candidate", ERROR,
    "A candidate whose newest recorded decision rejects it is promoted.")
PROMOTION_ON_STALE_DECISION = _code(
    "MP752", "promotion-on-stale-decision", ERROR,
    "The accepted decision cites a bundle that the candidate's evidence no longer matches.")
PROMOTION_POLICY_NOT_MET = _code(
    "MP753", "promotion-policy-not-met", ERROR,
    "The accepted decision cites no policy, another policy, or one the candidate does not meet.")
REGISTERED_MODEL_REPLACED = _code(
    "MP754", "registered-model-replaced", ERROR,
    "A registered model's bytes are not those of the candidate it was promoted from.")
REGISTERED_MODEL_UNKNOWN = _code(
    "MP755", "registered-model-unknown", ERROR,
    "No candidate in the evidence store has a registered model's bytes.")

# --- MP8xx: reproducibility: references that move (mlpipe.checks.reproducibility)
ENVIRONMENT_UNVERSIONED = _code("MP801", "environment-unversioned", WARNING,
    "An environment without a version resolves to whichever version is latest.")
MOVING_REFERENCE = _code("MP802", "moving-reference", WARNING,
    "An environment or data asset is referenced by a label such as @latest, not a version.")
IMAGE_TAG_WITHOUT_DIGEST = _code("MP803", "image-tag-without-digest", WARNING,
    "A Docker image is referenced by a tag, which can be moved, not by its digest.")
READ_OUTSIDE_INPUTS = _code(
    "MP804", "read-outside-inputs", WARNING,
    "A step read files that are none of its declared inputs, so its cache key cannot see them "
    "change.")
COMPONENT_VERSION_REUSED = _code(
    "MP805", "component-version-reused", WARNING,
    "A component's name and version are recorded in the evidence store with other code: one "
    "version now names two codes.")
OUTPUT_PATH_FIXED = _code(
    "MP806", "output-path-fixed", WARNING,
    "An output is bound to a fixed storage path: every run writes the same place (or two "
    "outputs write one place).")
LARGE_FILE_IN_UPLOAD = _code(
    "MP850", "large-file-in-upload", WARNING,
    "A large file is left in the code Azure ML uploads for the pipeline's function components.")
COMPUTE_NOT_FOUND = _code(
    "MP851", "compute-not-found", ERROR,
    "A compute the job runs on does not exist in the workspace.")
COMPUTE_SIZE_DIFFERS = _code(
    "MP852", "compute-size-differs", ERROR,
    "A step declares its compute with another VM size than the workspace's compute has.")
COMPUTE_MAX_NODES_TOO_FEW = _code(
    "MP853", "compute-max-nodes-too-few", ERROR,
    "A step asks for more instances than its compute cluster's max nodes.")
VM_SIZE_NOT_OFFERED = _code(
    "MP854", "vm-size-not-offered", ERROR,
    "A serverless step asks for a VM size the workspace's region does not offer.")
QUOTA_BELOW_DEMAND = _code(
    "MP855", "quota-below-demand", ERROR,
    "A serverless step needs more vCPUs of its VM family than the subscription's quota.")
QUOTA_IN_USE = _code(
    "MP856", "quota-in-use", WARNING,
    "A serverless step needs more vCPUs of its VM family than the quota has free now.")
ASSET_VERSION_NOT_FOUND = _code(
    "MP857", "asset-version-not-found", ERROR,
    "A registered environment, component or data asset version the job names does not exist.")
REFERENCE_RESOLVED = _code(
    "MP858", "reference-resolved", INFO,
    "A label or latest reference named one version today, recorded with the run.")
REGISTERED_ENVIRONMENT_WITHOUT_MLPIPE = _code(
    "MP859", "registered-environment-without-mlpipe", ERROR,
    "A registered environment a function step runs in lists no mlpipe in its conda file.")
MLFLOW_CLIENT_REJECTED = _code(
    "MP860", "mlflow-client-rejected", WARNING,
    "An environment's MLflow client is one the Azure ML tracking server does not accept.")
ENVIRONMENT_CONTENTS_UNKNOWN = _code(
    "MP861", "environment-contents-unknown", INFO,
    "A registered environment is an image or build context whose packages mlpipe cannot read.")
REGISTRY_ASSET_NOT_CHECKED = _code(
    "MP862", "registry-asset-not-checked", INFO, "A registry asset the job names is not checked.")
COULD_NOT_CHECK = _code(
    "MP863", "could-not-check", INFO, "The workspace did not answer a pre-flight question.")
# --- MP870-MP874: what a sync of an Azure ML run could not read (mlpipe.evidence.records.findings)
STEP_FACTS_UNKNOWN = _code("MP870", "step-facts-unknown", WARNING, "A synced Azure ML step "
                           "left facts unknown: its step record, outputs or metrics.")
# --- MP900-MP929: a failed step, diagnosed at the layer that failed (mlpipe.judgements.diagnosis)
#     MP900-MP904 contract and output completeness
STEP_INPUT_REJECTED = _code(
    "MP900", "step-input-rejected", ERROR,
    "An input did not match its contract when the step started, so its body never ran.")
STEP_OUTPUT_NOT_WRITTEN = _code(
    "MP901", "step-output-not-written", ERROR,
    "A step finished without writing one of its declared outputs.")
STEP_OUTPUT_REJECTED = _code(
    "MP902", "step-output-rejected", ERROR,
    "An output the step wrote does not match its contract, so no consumer may read it.")
#     MP905-MP912 launch topology and framework initialization
RENDEZVOUS_NOT_FORMED = _code(
    "MP905", "rendezvous-not-formed", ERROR,
    "A rank of a distributed step never joined the rendezvous, so the process group never formed.")
PROCESS_GROUP_INIT_FAILED = _code(
    "MP906", "process-group-init-failed", ERROR,
    "Initializing the framework's process group raised (init_process_group, its store, or a "
    "collective without a group).")
RANK_DIED = _code(
    "MP907", "rank-died", ERROR,
    "A step process ended without recording a failure: killed by a signal, or exited before "
    "its runtime could say why.")
LAUNCH_REFUSED = _code(
    "MP908", "launch-refused", ERROR,
    "A distributed launch was refused before any process started: it does not fit this "
    "machine as declared.")
DATA_NOT_DIVIDED = _code(
    "MP910", "data-not-divided", ERROR,
    "The ranks of a distributed step all ran, but did not divide the data between them.")
#     MP913-MP916 model output ownership
OUTPUT_OWNERSHIP_VIOLATED = _code(
    "MP913", "output-ownership-violated", ERROR,
    "A single-writer output was written by more than one rank, or by a rank that does not own it.")
#     MP917-MP920 application logging and worker aggregation
METRIC_NOT_AGGREGATED = _code(
    "MP917", "metric-not-aggregated", ERROR,
    "Ranks logged their own partial values of a metric as the global one.")
METRIC_MISSING_FROM_REPORT = _code(
    "MP918", "metric-missing-from-report", ERROR,
    "The step ran, but its metrics report lacks a metric its contract requires, or records "
    "it with the wrong scope or population.")
#     MP921-MP924 declared dependencies and reuse
UNDECLARED_INPUT_FAILED = _code(
    "MP921", "undeclared-input-failed", ERROR,
    "The step failed on a file it reads without declaring it as an input.")
#     MP926-MP929 the step's own code, and mlpipe's runtime
STEP_CODE_RAISED = _code(
    "MP926", "step-code-raised", ERROR,
    "The step's own code raised (or its script exited non-zero) after its inputs were accepted.")
STEP_NOT_STARTED = _code(
    "MP927", "step-not-started", ERROR,
    "A step's processes could not be started: its command, its code folder or its launch is "
    "not usable as declared.")
RUNTIME_FAILED = _code(
    "MP928", "runtime-failed", ERROR,
    "The step runtime of mlpipe itself failed around the step's body.")

# --- MP930-MP939: what the screens say (issue 23)
#     MP930 a failed step's contract mismatch that its wiring caused (mlpipe.judgements.diagnosis)
CONTRACT_MISMATCH_FROM_WIRING = _code(
    "MP930", "contract-mismatch-from-wiring", ERROR,
    "A step's contract rejected what it was given because of its wiring: an evaluation's input "
    "is bound to the artifact its model was trained on.")

# --- MP960-MP989: hostile input and definitions that cannot run (issue 14)
COMPONENT_BODY_NEVER_RUNS = _code(
    "MP960", "component-body-never-runs", ERROR,
    "A component's function is a generator or a coroutine (yield, async def): calling it runs "
    "none of its body.")
CREDENTIAL_IN_RECORDED_VALUE = _code(
    "MP961", "credential-in-recorded-value", WARNING,
    "A parameter value or a declared environment variable looks like a credential (a key, a "
    "token, a password); it would be recorded in clear in the store, the bundle and exports.")
SECRET_RECORDED_IN_CLEAR = _code(
    "MP962", "secret-recorded-in-clear", ERROR,
    "A Secret parameter is bound where its value would be written down in clear: to a literal "
    "in the pipeline's source, or across a parameter that is not a Secret.")
