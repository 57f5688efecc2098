"""Generated pipelines (hypothesis): every export validates with azure-ai-ml and loads back
to the structure mlpipe wrote."""
import pathlib
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from backends.azure.test_export import TESTS, assert_round_trip
from mlpipe.artifacts import AssetType
from mlpipe.backends.azure.export import write_export
from mlpipe.distribution import Mpi, PyTorch, TensorFlow
from mlpipe.spec import (
    ComponentSpec,
    Compute,
    Environment,
    InputRole,
    Literal,
    ParamSpec,
    ParamType,
    PipelineInput,
    PipelineInputSpec,
    PipelineSpec,
    PortSpec,
    StepOutput,
    StepSpec,
)

KINDS = list(AssetType)
ENVS = [Environment("env-a", version="1"), Environment("env-b", version="2"),
        Environment("env-c"), Environment("", image="mcr.microsoft.com/azureml/base:1")]
DISTRIBUTIONS = st.sampled_from([None, PyTorch(), PyTorch(processes_per_node=2), Mpi(4),
                                 TensorFlow(workers=2)])


@st.composite
def params(draw, prefix):
    out = []
    for j in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from([ParamType.INT, ParamType.FLOAT, ParamType.STR,
                                     ParamType.BOOL]))
        name = f"{prefix}{j}"
        if kind is ParamType.INT:
            lo = draw(st.integers(-5, 5))
            out.append(ParamSpec(name, kind, False, lo + draw(st.integers(0, 3)), lo, lo + 3))
        elif kind is ParamType.FLOAT:
            out.append(ParamSpec(name, kind, False, 0.5, 0.0, 1.0))
        elif kind is ParamType.STR:
            choices = tuple(draw(st.lists(st.sampled_from(["a", "b", "c"]), min_size=1,
                                          unique=True)))
            out.append(ParamSpec(name, kind, False, choices[0], choices=choices))
        else:
            out.append(ParamSpec(name, kind, False, draw(st.booleans())))
    return tuple(out)


@st.composite
def components(draw, index):
    inputs = tuple(PortSpec(f"i{j}", k, optional=draw(st.booleans())) for j, k in
                   enumerate(draw(st.lists(st.sampled_from(KINDS), max_size=3))))
    outputs = tuple(PortSpec(f"o{j}", k) for j, k in
                    enumerate(draw(st.lists(st.sampled_from(KINDS), min_size=1, max_size=3))))
    script = draw(st.booleans())
    return ComponentSpec(
        name=f"c{index}", version=draw(st.sampled_from(["1", "1.2.3", "2024.1"])),
        inputs=inputs, outputs=outputs, params=draw(params("p")), code_digest="sha256:0",
        environment=draw(st.sampled_from(ENVS)),
        compute=draw(st.sampled_from([None, Compute("cpu"), Compute("gpu")])),
        instances=draw(st.integers(1, 3)), distribution=draw(DISTRIBUTIONS),
        reuse=draw(st.booleans()),
        command="python run.py" if script else None,
        function=None if script else "fixtures.azure.pipeline:fit")


@st.composite
def pipelines(draw):
    comps = [draw(components(i)) for i in range(draw(st.integers(1, 3)))]
    inputs: list[PipelineInputSpec] = []
    steps: list[StepSpec] = []
    produced: list[tuple[str, PortSpec]] = []
    for n in range(draw(st.integers(1, 6))):
        comp = draw(st.sampled_from(comps))
        bindings = []
        for port in comp.inputs:
            sources = [(s, p) for s, p in produced if p.kind is port.kind]
            choice = draw(st.sampled_from(["step", "input", "literal", "none"]))
            if choice == "step" and sources:
                s, p = draw(st.sampled_from(sources))
                bindings.append((port.name, StepOutput(s, p.name)))
            elif choice == "literal":
                bindings.append((port.name, Literal("azureml://datastores/d/paths/x")))
            elif choice == "input" or not port.optional:
                name = f"in{len(inputs)}"
                inputs.append(PipelineInputSpec(name, InputRole.ARTIFACT, kind=port.kind))
                bindings.append((port.name, PipelineInput(name)))
        for param in comp.params:
            choice = draw(st.sampled_from(["default", "literal", "input"]))
            if choice == "literal":
                bindings.append((param.name, Literal(param.default)))
            elif choice == "input":
                name = f"in{len(inputs)}"
                inputs.append(PipelineInputSpec(name, InputRole.PARAM, required=False,
                                                default=param.default, param=param))
                bindings.append((param.name, PipelineInput(name)))
        steps.append(StepSpec(f"s{n}", comp, tuple(bindings)))
        produced.extend((f"s{n}", p) for p in comp.outputs)
    chosen = draw(st.lists(st.sampled_from(produced), max_size=3, unique=True))
    outputs = tuple((f"out{j}", StepOutput(s, p.name)) for j, (s, p) in enumerate(chosen))
    return PipelineSpec("generated", tuple(inputs), tuple(steps), outputs)


@pytest.mark.slow
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pipelines())
def test_every_generated_export_validates_and_loads_back_equal(spec):
    with tempfile.TemporaryDirectory() as tmp:
        write_export(spec, tmp, code_root=TESTS, check=False)  # YAML's reach, not wiring
        assert_round_trip(pathlib.Path(tmp))
