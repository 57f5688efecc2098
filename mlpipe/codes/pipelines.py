"""The codes of a pipeline before it runs: the checker, structure, parameters, artifact kinds,
contracts, the distributed launch and its coordination, Azure ML import and placement
(MP0xx-MP659). In code order; ``mlpipe.codes`` is their face."""
from __future__ import annotations

from mlpipe.codes.book import publish as _code
from mlpipe.diagnostics import Severity

ERROR, WARNING, INFO = Severity.ERROR, Severity.WARNING, Severity.INFO

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
STAGE_LITERALS_DISAGREE = _code(
    "MP418", "stage-literals-disagree", WARNING,
    "A training step and a step reading its model state different literals for one "
    "preprocessing value (normalisation, class order, feature order, input size).")

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
#     (mlpipe.judgements.coordination)
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
INFINIBAND_DISABLED = _code(
    "MP538", "infiniband-disabled", WARNING,
    "A multi-node GPU job on an InfiniBand size tells NCCL not to use InfiniBand.")
THREADS_EXCEED_CORES = _code(
    "MP539", "threads-exceed-cores", WARNING,
    "A job's OMP_NUM_THREADS times its processes per node exceeds the VM size's vCPUs.")

# --- MP540-MP549: the rank-level trace of a distributed step, after it ran
#     (mlpipe.judgements.ranktrace)
COLLECTIVE_MISMATCH = _code(
    "MP540", "collective-mismatch", ERROR,
    "The ranks of a step called a collective a different number of times (one rank called it "
    "where the others did not).")
RANKS_SHARE_A_DEVICE = _code(
    "MP541", "ranks-share-a-device", ERROR,
    "Two ranks on one node requested the same GPU.")
RANK_HUNG_IN_COLLECTIVE = _code(
    "MP542", "rank-hung-in-collective", ERROR,
    "A rank waited in a collective far longer than the step's collectives took, and the step "
    "did not finish.")
EVERY_RANK_DOES_ONE_RANKS_WORK = _code(
    "MP543", "every-rank-does-one-ranks-work", WARNING,
    "Every rank made the same tracking or storage call (an MLflow run or metric, a download, "
    "an extraction, a checkpoint to one path) that one rank should make.")

# --- MP560-MP569: the differential rehearsal, the step at world size 1 against its topology
#     (mlpipe.judgements.rehearsal)
REHEARSAL_EXAMPLES_DIFFER = _code(
    "MP560", "rehearsal-examples-differ", WARNING,
    "The ranks together train on more or fewer examples than one process does.")
REHEARSAL_GLOBAL_BATCH_DIFFERS = _code(
    "MP561", "rehearsal-global-batch-differs", WARNING,
    "The ranks' batches add up to another global batch than one process uses, at the same "
    "learning rate.")
REHEARSAL_LOSS_DIVERGES = _code(
    "MP562", "rehearsal-loss-diverges", WARNING,
    "The training loss at the launched topology leaves world size 1's beyond the tolerance.")
REHEARSAL_METRIC_DIFFERS = _code(
    "MP563", "rehearsal-metric-differs", WARNING,
    "A global metric's value or population differs between world size 1 and the topology.")
REHEARSAL_PARAMETERS_DIFFER = _code(
    "MP564", "rehearsal-parameters-differ", ERROR,
    "The ranks of a data-parallel step end with different trained parameters.")
REHEARSAL_RUN_FAILED = _code(
    "MP565", "rehearsal-run-failed", ERROR,
    "A rehearsal run of the step failed, at world size 1 or at the topology.")

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
