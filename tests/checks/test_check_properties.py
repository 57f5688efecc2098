"""Hypothesis properties of the checker over generated declarations: no check raises on any
of them, and generated designs that follow the guides report nothing at all."""
import dataclasses
import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mlpipe import Compute, Environment, Input, Mpi, Output, Param, PyTorch, TensorFlow, component
from mlpipe.checks import check_pipeline
from mlpipe.codes import CODES
from mlpipe.contracts import (
    Column,
    ImageFolder,
    LabelMap,
    Metric,
    MetricsReport,
    MLflowModel,
    SplitManifest,
    TabularSchema,
)
from mlpipe.distribution import NotAJobType
from mlpipe.spec import (
    CandidateSpec,
    InputRole,
    Literal,
    Location,
    PipelineInput,
    PipelineInputSpec,
    PipelineSpec,
    PortSpec,
    StepOutput,
    StepSpec,
)

LABELS = LabelMap("labels", classes=["ok", "dent"], version="1")
SPLIT = SplitManifest("split", splits=["train", "test"], required=["train", "test"])
EXAMPLES = ImageFolder("examples", layout="{split}/{class}/{file}", classes=LABELS,
                       splits=["train", "test"], file_kinds=["pgm"])
RAW = ImageFolder("raw", layout="{class}/{file}", classes=LABELS, file_kinds=["pgm"])
REPORT = MetricsReport("report", metrics=[Metric("accuracy", split="test")])
CPU = Compute("cpu-cluster", sku="Standard_D4s_v3")


@component(environment=Environment("cpu", version="1"), compute=CPU)
def prepare(raw: Input[RAW], split: Input[SPLIT], examples: Output[EXAMPLES],
            labels: Output[LABELS], seed: Param[int] = 1):
    pass


@component(environment=Environment("cpu", version="1"), compute=CPU)
def augment(examples: Input[EXAMPLES], out: Output[EXAMPLES], strength: Param[float] = 0.5):
    pass


@component(environment=Environment("cpu", version="1"), compute=CPU)
def train(examples: Input[EXAMPLES], labels: Input[LABELS], model: Output["mlflow_model"],
          epochs: Param[int, 1:100] = 5):
    pass


@component(environment=Environment("cpu", version="1"), compute=CPU)
def evaluate(model: Input["mlflow_model"], examples: Input[EXAMPLES], labels: Input[LABELS],
             report: Output[REPORT]):
    pass


#: GPU sizes with several GPUs and InfiniBand: a data-parallel design the guides endorse.
IB_SIZES = {"Standard_NC24rs_v3": 4, "Standard_ND40rs_v2": 8, "Standard_ND96isr_H100_v5": 8,
            "Standard_ND96amsr_A100_v4": 8}


@st.composite
def clean_pipelines(draw):
    """The example's design (prepare -> augment* -> train -> evaluate, a reviewed split as a
    pipeline input) with every choice the guides leave free drawn at random."""
    def env(comp):
        version = draw(st.sampled_from(["1", "2.3", "17"]))
        return dataclasses.replace(comp.spec, environment=Environment(
            draw(st.sampled_from(["cpu", "base-env", "team-env"])), version=version))

    steps = [StepSpec("prepare", env(prepare), (("raw", PipelineInput("raw")),
                                                ("split", PipelineInput("split")),
                                                ("seed", Literal(draw(st.integers(0, 99))))))]
    source = StepOutput("prepare", "examples")
    for i in range(draw(st.integers(0, 3))):
        name = f"augment_{i}"
        steps.append(StepSpec(name, env(augment), (("examples", source), (
            "strength", Literal(draw(st.floats(0, 1)))))))
        source = StepOutput(name, "out")
    trainer = env(train)
    if draw(st.booleans()):
        size = draw(st.sampled_from(sorted(IB_SIZES)))
        # trained on GPUs, evaluated on a CPU size: the model is saved as CPU tensors (MP630)
        model = dataclasses.replace(trainer.output("model"),
                                    contract=MLflowModel("model", device="cpu"))
        trainer = dataclasses.replace(
            trainer, outputs=tuple(model if p.name == "model" else p for p in trainer.outputs),
            compute=Compute("gpu-cluster", sku=size),
            instances=draw(st.integers(1, 4)),
            distribution=PyTorch(processes_per_node=IB_SIZES[size], backend="nccl",
                                 writers="rank0", metrics={"loss": "mean"}))
    steps.append(StepSpec("train", trainer, (("examples", source),
                                             ("labels", StepOutput("prepare", "labels")),
                                             ("epochs", Literal(draw(st.integers(1, 100)))))))
    steps.append(StepSpec("evaluate", env(evaluate), (
        ("model", StepOutput("train", "model")), ("examples", source),
        ("labels", StepOutput("prepare", "labels")))))
    inputs = (PipelineInputSpec("raw", InputRole.ARTIFACT),
              PipelineInputSpec("split", InputRole.ARTIFACT))
    return PipelineSpec(draw(st.sampled_from(["defects", "parts-v2"])), inputs, tuple(steps),
                        (("model", StepOutput("train", "model")),
                         ("report", StepOutput("evaluate", "report"))),
                        candidate=CandidateSpec("model", "report"))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clean_pipelines())
def test_designs_that_follow_the_guides_report_nothing(spec):
    assert [d.render() for d in check_pipeline(spec)[1]] == []


# --- anything at all: no check raises ------------------------------------------------------

HERE = os.path.abspath(__file__)
SIZES = ["Standard_D4s_v3", "Standard_NC6s_v3", "Standard_NC24s_v3", "Standard_NC24rs_v3",
         "Standard_ND96isr_H100_v5", "Standard_Unknown", None]
VARIABLES = ["TF_CONFIG", "MASTER_ADDR", "WORLD_SIZE", "RANK", "OMPI_COMM_WORLD_RANK",
             "NCCL_DEBUG", "PATH"]
TABLES = st.builds(lambda units, roles, ordered: TabularSchema("t", ordered=ordered, columns=[
    Column(f"c{i}", "float64", unit=u, role=r) for i, (u, r) in enumerate(zip(units, roles))]),
    st.lists(st.sampled_from([None, "mm", "cm", "degC", "°C", "K", "kg", "USD", "m/s", "%"]),
             min_size=1, max_size=3),
    st.lists(st.sampled_from(["feature", "other", "label", "key"]), min_size=3, max_size=3),
    st.booleans())
FOLDER_CONTRACTS = st.one_of(st.none(), st.just(EXAMPLES), st.just(RAW), st.just(ImageFolder),
                             st.builds(lambda s: ImageFolder("f", splits=s),
                                       st.none() | st.lists(st.sampled_from(["train", "test"]),
                                                            min_size=1, unique=True)))
FILE_CONTRACTS = st.one_of(st.none(), TABLES, st.just(LABELS), st.just(SPLIT), st.just(REPORT),
                           st.just(SplitManifest), st.builds(lambda s: SplitManifest("s", splits=s),
                                                              st.lists(st.sampled_from(
                                                                  ["train", "test", "val"]),
                                                                  min_size=1, unique=True)))
PARAM_VALUES = st.one_of(st.integers(-3, 300), st.sampled_from(
    ["adam", HERE, os.path.dirname(HERE), "/", "https://x.org/d.csv", "azureml:d@latest",
     "azureml:d:3", "s3://b/k", "", "~"]), st.none(), st.booleans())


@st.composite
def declarations(draw, index):
    base = draw(st.sampled_from([prepare, augment, train, evaluate])).spec
    kind = draw(st.sampled_from(["uri_folder", "uri_file", "mlflow_model"]))
    contract = draw(FOLDER_CONTRACTS if kind == "uri_folder" else
                    FILE_CONTRACTS if kind == "uri_file" else st.none())
    from mlpipe.artifacts import AssetType
    port_kind = AssetType(kind)
    outputs = (PortSpec(draw(st.sampled_from(["out", "test", "model", "split"])), port_kind,
                        contract),)
    inputs = tuple(PortSpec(n, AssetType(draw(st.sampled_from(
        ["uri_folder", "uri_file", "mlflow_model"]))), draw(st.none() | st.just(SPLIT)),
        optional=True) for n in draw(st.lists(st.sampled_from(["data", "split", "model"]),
                                               max_size=2, unique=True)))
    dist = draw(st.one_of(
        st.none(),
        st.builds(PyTorch, processes_per_node=st.none() | st.integers(1, 8),
                  backend=st.sampled_from([None, "nccl", "gloo"]),
                  writers=st.sampled_from([(), "rank0", {"out": 0}, {"ghost": "sharded"}])),
        st.builds(TensorFlow, workers=st.none() | st.integers(1, 4),
                  parameter_servers=st.integers(0, 2)),
        st.builds(Mpi, processes_per_node=st.none() | st.integers(1, 4)),
        st.just(NotAJobType("deepspeed"))))
    env = draw(st.one_of(st.none(), st.builds(
        Environment, st.sampled_from(["e", "AzureML-x"]),
        version=st.sampled_from([None, "1", "latest", "@prod"]),
        image=st.sampled_from([None, "python", "python:latest", "python@sha256:" + "a" * 64]),
        variables=st.dictionaries(st.sampled_from(VARIABLES), st.sampled_from(["1", "{}"]),
                                  max_size=2))))
    function = draw(st.sampled_from([base.function, None, "__main__:f", "m:g.<locals>.f",
                                     "bad module:f"]))
    location = draw(st.sampled_from([base.location, None, Location("/no/such/file.py", 3),
                                     Location(HERE, 1)]))
    return dataclasses.replace(
        base, name=f"c{index}", inputs=inputs, outputs=outputs, distribution=dist,
        instances=draw(st.integers(1, 4)), environment=env,
        compute=Compute("cluster", sku=draw(st.sampled_from(SIZES))),
        environment_variables=tuple(sorted(draw(st.dictionaries(
            st.sampled_from(VARIABLES), st.just("1"), max_size=2)).items())),
        command=draw(st.sampled_from([None, "python x.py", "mpirun -np 4 python x.py"])),
        function=function, location=location,
        params=base.params[:1])


@st.composite
def anything(draw):
    n = draw(st.integers(1, 6))
    steps, produced = [], []
    for i in range(n):
        comp = draw(declarations(i))
        bindings = []
        for port in comp.inputs:
            choice = draw(st.sampled_from(["input", "step", "literal"]))
            if choice == "step" and produced:
                bindings.append((port.name, StepOutput(*draw(st.sampled_from(produced)))))
            elif choice == "literal":
                bindings.append((port.name, Literal(draw(st.sampled_from(
                    ["data/x", "azureml:d@latest", "https://x/y", HERE])))))
            else:
                bindings.append((port.name, PipelineInput("raw")))
        for param in comp.params:
            bindings.append((param.name, Literal(draw(PARAM_VALUES))))
        steps.append(StepSpec(f"s{i}", comp, tuple(bindings), Location(HERE, i + 1)))
        produced += [(f"s{i}", p.name) for p in comp.outputs]
    last = draw(st.sampled_from(produced))
    candidate = draw(st.none() | st.just(CandidateSpec("o0", draw(st.none() | st.just("o1")))))
    outputs = (("o0", StepOutput(*last)), ("o1", StepOutput(*draw(st.sampled_from(produced)))))
    return PipelineSpec("anything", (PipelineInputSpec("raw", InputRole.ARTIFACT,
                                                       required=False,
                                                       default=draw(st.sampled_from(
                                                           [None, "azureml:d@latest"]))),),
                        tuple(steps), outputs, candidate=candidate)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.filter_too_much])
@given(anything())
def test_no_check_raises_on_any_declaration(spec):
    for d in check_pipeline(spec)[1]:
        assert d.code != "MP001", d.message
        assert CODES[d.code].name == d.name
        assert d.message and d.hint
