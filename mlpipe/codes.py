"""Every diagnostic code mlpipe publishes, in one table: code, kebab-case name, default
severity and a one-line summary; the checks, the importer, the coordination check, the bundle's
findings and ``--verify`` import their codes from here, and nothing else registers one.

Adding a code: take the next free number of your range (never reuse one), name the constant
after the kebab-case name (``artifact-kind-mismatch`` -> ``ARTIFACT_KIND_MISMATCH``), keep the
table in code order, write its ``docs/checks.md`` section (the why of each code lives there)
and place it in ``docs/rules.md``; tests/test_codes.py, tests/checks/test_docs.py and
tests/test_rules.py hold all of that to account. Imports only diagnostics.
"""
from __future__ import annotations

from mlpipe.diagnostics import Code, Severity, explain  # noqa: F401  (its documentation)

ERROR, WARNING, INFO = Severity.ERROR, Severity.WARNING, Severity.INFO

#: code -> Code, for every published code; name -> Code, the same entries.
CODES: dict[str, Code] = {}
_BY_NAME: dict[str, Code] = {}


def _code(code: str, name: str, severity: Severity, summary: str) -> Code:
    entry = Code(code, name, severity, summary)
    if code in CODES:
        raise ValueError(f"diagnostic code {code} is published twice")
    if name in _BY_NAME:
        raise ValueError(f"diagnostic name {name!r} is used by two codes")
    CODES[code] = _BY_NAME[name] = entry
    return entry


def named(name: str) -> Code:
    """The published code with kebab-case ``name``.

    Raises:
        KeyError: no code has that name.

    Example:
        >>> named("artifact-kind-mismatch").code
        'MP301'
    """
    return _BY_NAME[name]


def published() -> list[Code]:
    """Every published code, in code order."""
    return sorted(CODES.values(), key=lambda c: c.code)


# --- MP0xx: the checker itself (mlpipe.checks.registry)
CHECK_CRASHED = _code(
    "MP001", "check-crashed", ERROR,
    "A check raised an exception instead of reporting; the pipeline was not fully checked.")

# --- MP1xx: the structure of a pipeline: steps, ports, bindings (mlpipe.checks.structure)
DEPENDENCY_CYCLE = _code(
    "MP101", "dependency-cycle", ERROR,
    "Steps consume each other's outputs in a loop, so none can start.")
REQUIRED_INPUT_UNBOUND = _code(
    "MP102", "required-input-unbound", ERROR, "A required input of a step is bound to nothing.")
UNKNOWN_PORT = _code(
    "MP103", "unknown-port", ERROR,
    "A step is given a value for an input or parameter it does not have.")
UNKNOWN_OUTPUT = _code(
    "MP104", "unknown-output", ERROR, "A binding names an output that its step does not have.")
OUTPUT_BOUND_TWICE_IN_STEP = _code(
    "MP105", "output-bound-twice-in-step", WARNING,
    "One artifact feeds two inputs of the same step.")
DUPLICATE_STEP_NAME = _code(
    "MP106", "duplicate-step-name", ERROR, "Two steps of one pipeline have the same name.")
UNUSED_STEP_OUTPUTS = _code(
    "MP107", "unused-step-outputs", INFO,
    "No step and no pipeline output consumes what a step produces.")
AMBIGUOUS_STEP_REFERENCE = _code(
    "MP108", "ambiguous-step-reference", ERROR,
    "A whole step with several (or no) outputs is passed where one output is expected.")
OUTPUT_GIVEN_A_VALUE = _code(
    "MP109", "output-given-a-value", ERROR,
    "A step call binds a value to one of the step's outputs.")
BINDING_KIND_MISMATCH = _code(
    "MP110", "binding-kind-mismatch", ERROR,
    "An artifact is bound to a parameter, or a parameter value to an artifact input.")
DANGLING_BINDING = _code(
    "MP111", "dangling-binding", ERROR,
    "A binding names a step, output or pipeline input that does not exist.")
UNUSED_PIPELINE_INPUT = _code(
    "MP112", "unused-pipeline-input", WARNING,
    "A pipeline input is bound to no step and no output.")
COMPONENT_NOT_IMPORTABLE = _code(
    "MP113", "component-not-importable", ERROR,
    "A component defined in __main__, a notebook or inside a function: no step can import it.")
CODE_FOLDER_MISSING = _code(
    "MP114", "code-folder-missing", ERROR,
    "A job or component names a local code: folder that does not exist.")
JOB_TYPE_MISSPELLED = _code(
    "MP115", "job-type-misspelled", ERROR,
    "A job file spells its type in a case azure-ai-ml refuses (type: Command).")
SEARCH_SPACE_MISMATCH = _code(
    "MP116", "search-space-mismatch", ERROR,
    "A sweep's search space sets a parameter its trial does not take, or its trial reads one "
    "the space does not set.")

# --- MP2xx: parameters (mlpipe.checks.parameters)
PARAM_TYPE_MISMATCH = _code(
    "MP201", "param-type-mismatch", ERROR, "A parameter is given a value of the wrong type.")
PARAM_OUT_OF_RANGE = _code(
    "MP202", "param-out-of-range", ERROR,
    "A parameter is given a value outside its declared range.")
PARAM_NOT_IN_CHOICES = _code(
    "MP203", "param-not-in-choices", ERROR,
    "A parameter is given a value that is not one of its declared choices.")
REQUIRED_PARAM_MISSING = _code(
    "MP204", "required-param-missing", ERROR, "A parameter with no default is given no value.")
PARAM_NAMES_DATA = _code(
    "MP205", "param-names-data", WARNING,
    "A parameter's value names a file, folder or URL: data the cache key and evidence miss.")

# --- MP3xx: Azure ML artifact kinds (mlpipe.checks.artifacts)
ARTIFACT_KIND_MISMATCH = _code(
    "MP301", "artifact-kind-mismatch", ERROR,
    "An output is bound to an input whose Azure ML type it cannot feed.")
PIPELINE_INPUT_KIND_CONFLICT = _code(
    "MP302", "pipeline-input-kind-conflict", ERROR,
    "One pipeline input feeds step inputs of kinds no artifact can satisfy at once.")

# --- MP4xx: contracts on edges (mlpipe.checks.contracts)
CONTRACT_KIND_MISMATCH = _code(
    "MP401", "contract-kind-mismatch", ERROR,
    "An edge connects contracts of different kinds (a label map to an image folder).")
CONTRACT_VERSION_INCOMPATIBLE = _code(
    "MP402", "contract-version-incompatible", ERROR,
    "The producer's contract version does not satisfy the consumer's.")
SCHEMA_COLUMN_MISSING = _code(
    "MP403", "schema-column-missing", ERROR,
    "A column (or model input) the consumer requires is not produced.")
SCHEMA_DTYPE_MISMATCH = _code(
    "MP404", "schema-dtype-mismatch", ERROR,
    "A column is produced with another dtype than the consumer requires.")
SCHEMA_UNIT_MISMATCH = _code(
    "MP405", "schema-unit-mismatch", ERROR,
    "A column is produced in another unit than the consumer requires.")
SCHEMA_NULLABILITY_MISMATCH = _code(
    "MP406", "schema-nullability-mismatch", ERROR,
    "A column may be null but the consumer requires a value in every row.")
FEATURE_ORDER_MISMATCH = _code(
    "MP407", "feature-order-mismatch", ERROR,
    "Features are produced in another order than the consumer requires.")
LABEL_ENCODING_MISMATCH = _code(
    "MP408", "label-encoding-mismatch", ERROR,
    "A class is encoded with another code, or is missing, on one side of an edge.")
SPLIT_DISJOINTNESS_NOT_PROMISED = _code(
    "MP409", "split-disjointness-not-promised", ERROR,
    "A consumer requiring disjoint splits is fed a manifest that does not promise it.")
SPLIT_MISSING = _code(
    "MP410", "split-missing", ERROR,
    "A split the consumer requires is not guaranteed by the producer's manifest.")
METRIC_SCOPE_MISMATCH = _code(
    "MP411", "metric-scope-mismatch", ERROR,
    "A metric the consumer requires as global is produced as a partial value.")
CONTRACT_REQUIREMENT_UNMET = _code(
    "MP412", "contract-requirement-unmet", ERROR,
    "Any other way the producer's contract fails the consumer's requirement.")
CONTRACT_UNVERIFIED = _code(
    "MP413", "contract-unverified", WARNING,
    "A port with a contract is fed by an output that declares none.")
# (mlpipe.checks.evaluation and the contract requirements in mlpipe.checks.contracts)
EVALUATION_SPLIT_GENERATED = _code(
    "MP414", "evaluation-split-generated", WARNING,
    "An evaluation's data is split inside the run, not taken from a recorded split definition.")
CONTRACT_EXTRA_MISSING = _code(
    "MP415", "contract-extra-missing", WARNING,
    "A contract's validation needs a module (an optional extra) that is not installed.")
EVALUATION_READS_TRAINING_ARTIFACT = _code(
    "MP416", "evaluation-reads-training-artifact", WARNING,
    "An evaluation reads the artifact its model trained on, and nothing says which part each "
    "reads.")
EVALUATION_OVERLAP_UNCHECKED = _code(
    "MP417", "evaluation-overlap-unchecked", WARNING,
    "Nothing recorded can tell whether the evaluation population overlaps the training one.")

# --- MP500-MP519: the distributed launch contract (mlpipe.checks.distribution)
PYTORCH_ONE_PROCESS_PER_NODE = _code(
    "MP501", "pytorch-one-process-per-node", ERROR,
    "PyTorch on a multi-GPU size without processes_per_node: one process per node, GPUs idle.")
PROCESSES_GPUS_MISMATCH = _code(
    "MP502", "processes-gpus-mismatch", ERROR,
    "Processes per node differ from the VM size's GPUs per node.")
WORLD_SIZE_MISMATCH = _code(
    "MP503", "world-size-mismatch", ERROR,
    "A world size stated in the step disagrees with instances x processes per node.")
GPU_DISTRIBUTION_ON_CPU_SIZE = _code(
    "MP504", "gpu-distribution-on-cpu-size", WARNING,
    "PyTorch distribution on a CPU-only VM size with no CPU backend declared.")
BACKEND_DEVICE_MISMATCH = _code(
    "MP505", "backend-device-mismatch", ERROR,
    "The declared torch.distributed backend does not suit the VM size (NCCL on CPU, gloo on GPU).")
MULTI_NODE_WITHOUT_INFINIBAND = _code(
    "MP506", "multi-node-without-infiniband", WARNING,
    "Multi-node GPU training on a VM size without InfiniBand: scaling will suffer.")
MPI_PROCESSES_UNSET = _code(
    "MP507", "mpi-processes-unset", ERROR,
    "An MPI distribution without processes_per_node, which Azure ML requires.")
NODE_TRAFFIC_BLOCKED = _code(
    "MP508", "node-traffic-blocked", ERROR,
    "MPI or multi-node training on a cluster that blocks node-to-node traffic.")
LAUNCHER_IN_COMMAND = _code(
    "MP509", "launcher-in-command", ERROR,
    "Torchrun, torch.distributed.launch, mpirun or deepspeed in a command Azure ML launches.")
LIBRARY_AS_JOB_TYPE = _code(
    "MP510", "library-as-job-type", ERROR,
    "DeepSpeed, FSDP or Horovod requested as a distribution type; they are libraries.")
TF_PARAMETER_SERVERS = _code(
    "MP511", "tf-parameter-servers", WARNING,
    "TensorFlow parameter servers (a TF1 pattern) for TF2 code.")
INSTANCES_WITHOUT_DISTRIBUTION = _code(
    "MP512", "instances-without-distribution", ERROR,
    "Instances > 1 for a component that declares no distribution: extra nodes sit idle.")
OUTPUT_WRITER_UNDECLARED = _code(
    "MP513", "output-writer-undeclared", ERROR,
    "A distributed step's output has no declared writer policy.")
GLOBAL_METRIC_UNAGGREGATED = _code(
    "MP514", "global-metric-unaggregated", ERROR,
    "A metric declared global has no aggregation across ranks.")
CLUSTER_TOO_SMALL = _code(
    "MP515", "cluster-too-small", ERROR,
    "A step asks for more instances than its cluster has nodes.")
UNKNOWN_VM_SIZE = _code(
    "MP516", "unknown-vm-size", INFO,
    "A distributed step's VM size is unknown, so GPU and network checks were skipped.")
WRITER_FOR_UNKNOWN_OUTPUT = _code(
    "MP517", "writer-for-unknown-output", ERROR,
    "A writer policy names an output the component does not have.")
# (mlpipe.checks.frameworks)
FOREIGN_LAUNCH_VARIABLE = _code(
    "MP518", "foreign-launch-variable", ERROR,
    "A step sets another framework's launch variable (TF_CONFIG on PyTorch, MASTER_ADDR on TF).")
GPU_SIZE_WITHOUT_ACCELERATOR_CODE = _code(
    "MP519", "gpu-size-without-accelerator-code", INFO,
    "A single-process step on a GPU size imports no library that uses a GPU.")

# --- MP520-MP529: how a distributed step's ranks coordinated, after it ran
#     (mlpipe.checks.coordination)
COORDINATION_UNRECORDED = _code(
    "MP520", "coordination-unrecorded", WARNING,
    "Ranks of a distributed step left no coordination record, so coordination is unevidenced.")
SHARD_OVERLAP = _code(
    "MP521", "shard-overlap", ERROR, "Two ranks consumed the same example in one distributed step.")
INDEPENDENT_COPIES = _code(
    "MP522", "independent-copies", ERROR,
    "Every rank consumed the whole data set: N independent copies, not a distributed run.")
COVERAGE_GAP = _code(
    "MP523", "coverage-gap", ERROR, "Examples of the data set that no rank consumed.")
MULTIPLE_WRITERS = _code(
    "MP524", "multiple-writers", ERROR,
    "More than one rank wrote an output that has a single writer.")
UNDECLARED_WRITER = _code(
    "MP525", "undeclared-writer", ERROR, "A rank other than the declared writer wrote an output.")
PARTIAL_METRIC_LOGGED_AS_GLOBAL = _code(
    "MP526", "partial-metric-logged-as-global", ERROR,
    "A metric logged as global by more than one rank: each rank's partial view, not the whole.")
DECLARED_WRITER_NEVER_WROTE = _code(
    "MP527", "declared-writer-never-wrote", ERROR,
    "An output's declared writer (or, for a sharded output, a rank) wrote nothing to it.")

# --- MP528-MP539: a step's code against its declared launch (mlpipe.checks.launch)
WORKERS_STARTED_IN_BODY = _code(
    "MP528", "workers-started-in-body", ERROR,
    "A step's code starts its own worker processes although Azure ML starts the step's processes.")
LAUNCH_VARIABLE_OVERWRITTEN = _code(
    "MP529", "launch-variable-overwritten", ERROR,
    "A step's code overwrites a launch variable Azure ML injects (RANK, WORLD_SIZE, ...).")
FOREIGN_DISTRIBUTION_STRATEGY = _code(
    "MP530", "foreign-distribution-strategy", ERROR,
    "A step's code coordinates through another framework than its distribution (tf.distribute "
    "in a PyTorch job, torch.distributed in a TensorFlow job, Horovod or mpi4py without MPI).")
TF_WORKERS_INSTANCES_MISMATCH = _code(
    "MP531", "tf-workers-instances-mismatch", ERROR,
    "A TensorFlow distribution's worker count disagrees with the step's instances.")
DISTRIBUTION_WITHOUT_COORDINATION = _code(
    "MP532", "distribution-without-coordination", WARNING,
    "A distributed step's code (and the local modules it imports) uses no distributed API.")
DATA_PARALLEL_IN_LAUNCHED_PROCESSES = _code(
    "MP533", "data-parallel-in-launched-processes", ERROR, "DataParallel per process of a node.")
GLOBAL_METRIC_MISCOUNTED = _code(
    "MP534", "global-metric-miscounted", WARNING, "A global metric counts its examples wrongly.")
COLLECTIVE_UNDER_RANK_GUARD = _code(
    "MP535", "collective-under-rank-guard", ERROR, "A collective only some ranks call.")
INSTALL_AT_RUN_TIME = _code(
    "MP536", "install-at-run-time", WARNING, "A step installs packages from an index as it runs.")
EVERY_RANK_DOWNLOADS = _code(
    "MP537", "every-rank-downloads", WARNING, "Every process of a step downloads the same data.")

# --- MP6xx: Azure ML YAML import (mlpipe.backends.azure.importer)
UNREADABLE_BINDING_EXPRESSION = _code(
    "MP601", "unreadable-binding-expression", ERROR,
    "A job input or output is a ${{...}} expression that is not a parent input, a sibling job's "
    "output or a parent output.")
PIPELINE_OUTPUT_NOT_PRODUCED = _code(
    "MP602", "pipeline-output-not-produced", WARNING,
    "A pipeline declares an output that no job binds to.")
AZURE_ONLY_STEP = _code(
    "MP603", "azure-only-step", INFO,
    "A step mlpipe checks and exports but cannot run here (a sweep, parallel, Spark, AutoML, "
    "data transfer, import or control-flow job, or a registered component).")
VALUE_CHANGED_BY_AZURE = _code(
    "MP604", "value-changed-by-azure", WARNING,
    "A value in Azure ML YAML that Azure ML reads as the parameter's type only by changing it "
    "(10.01 for an integer becomes 10).")
PIPELINE_INPUT_WITHOUT_PATH = _code(
    "MP605", "pipeline-input-without-path", WARNING,
    "An exported pipeline job leaves a data input without a path, so Azure ML cannot run it "
    "as written.")
MODULE_OUTSIDE_CODE_ROOT = _code(
    "MP606", "module-outside-code-root", ERROR,
    "A function component's module cannot be imported from the folder uploaded as its code, "
    "so its step would fail on Azure ML with ModuleNotFoundError.")

# --- MP630-MP639: placement: what crosses compute kinds, what an environment must hold
#     (mlpipe.checks.placement, .environment, .needs)
MODEL_DEVICE_CROSSES_COMPUTE = _code("MP630", "model-device-crosses-compute", WARNING,
    "A step on CPU-only compute loads a model that GPU code (its body shows a GPU placement) "
    "saved, and whose contract does not say its tensors are saved on the CPU.")
ENVIRONMENT_WITHOUT_MLPIPE = _code("MP631", "environment-without-mlpipe", WARNING,
    "A function step's conda file does not install mlpipe-aml at the compiling version.")
FRAMEWORK_MISSING_FROM_ENVIRONMENT = _code("MP632", "framework-missing-from-environment", ERROR,
    "A step's declared distribution or its code needs a framework (torch, tensorflow, horovod, "
    "...) that its environment's conda/pip specification does not install.")
ACCELERATOR_CODE_ON_CPU_SIZE = _code("MP633", "accelerator-code-on-cpu-size", ERROR,
    "A step on a VM size without a GPU puts work on a GPU unconditionally (.cuda(), "
    "torch.device('cuda'), backend='nccl').")
ENVIRONMENT_LACKS_VALIDATOR_NEED = _code("MP634", "environment-lacks-validator-need", ERROR,
    "A step's conda file installs nothing that one of its contracts' validators imports.")
ENVIRONMENT_MLFLOW_CLIENT_REJECTED = _code("MP635", "environment-mlflow-client-rejected", WARNING,
    "A step's conda file allows an MLflow client the Azure ML tracking server rejects (2.19 "
    "or later), or lists one without azureml-mlflow.")

# --- MP660-MP679: evidence of what lives only on Azure ML (mlpipe.evidence.findings,
#     mlpipe.evidence.verify)
CONTENT_UNKNOWN = _code(
    "MP660", "content-unknown", ERROR,
    "The candidate's model or evaluation report has no content digest: only a reference to "
    "where its bytes are was recorded.")
ARTIFACT_NOT_REHASHED = _code(
    "MP661", "artifact-not-rehashed", INFO,
    "An artifact the bundle names lives only in remote storage (an Azure ML output) and was "
    "not downloaded and re-hashed by this verification.")

# --- MP700-MP709: findings of the evidence bundle (mlpipe.evidence.findings); MP705-MP709:
#     criteria of a qualification policy (mlpipe.evidence.policy)
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

# --- MP710-MP719: verification of a sealed bundle (mlpipe.evidence.verify); MP715-MP716, MP718:
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

# --- MP720-MP729: the team store (mlpipe.evidence.verify, mlpipe.evidence.roots)
BUNDLE_CHAIN_MISSING = _code(
    "MP720", "bundle-chain-missing", ERROR,
    "A candidate has no sealed bundle to verify against: never sealed, or its bundles removed.")

# --- MP730-MP749: signatures and the trust policy (mlpipe.evidence.trust, mlpipe.evidence.signing)
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
#     (mlpipe.evidence.promotion, mlpipe.evidence.trace)
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
# --- MP870-MP874: what a sync of an Azure ML run could not read (mlpipe.evidence.findings)
STEP_FACTS_UNKNOWN = _code("MP870", "step-facts-unknown", WARNING, "A synced Azure ML step "
                           "left facts unknown: its step record, outputs or metrics.")
# --- MP900-MP929: a failed step, diagnosed at the layer that failed (mlpipe.checks.diagnosis)
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
#     MP930 a failed step's contract mismatch that its wiring caused (mlpipe.checks.diagnosis)
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
