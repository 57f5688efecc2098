"""Hypothesis properties of compiling and checking."""
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fixtures.components import compare, fit, load, passthrough, score, split_data
from mlpipe import Input, Output, component, pipeline
from mlpipe.checks import check_pipeline
from mlpipe.codes import CODES
from mlpipe.graph import compile_pipeline, input_node
from mlpipe.spec import (
    InputRole,
    Literal,
    PipelineInput,
    PipelineInputSpec,
    PipelineSpec,
    StepOutput,
    StepSpec,
)


@component
def node(out: Output["uri_folder"], a: Input["uri_folder"] = None, b: Input["uri_folder"] = None,
         c: Input["uri_folder"] = None):
    pass


@st.composite
def dags(draw):
    """Per step, the sources of its inputs a, b, c: -1 the pipeline input, j an earlier step."""
    n = draw(st.integers(1, 40))
    return [draw(st.lists(st.integers(-1, i - 1), max_size=3, unique=True)) for i in range(n)]


def build(edges):
    @pipeline
    def generated(raw):
        handles = []
        for sources in edges:
            kwargs = {port: raw if s == -1 else handles[s].out for port, s in zip("abc", sources)}
            handles.append(node(**kwargs))
        return {"last": handles[-1].out}
    return generated


def _name(i: int) -> str:
    return "node" if i == 0 else f"node_{i + 1}"


@settings(max_examples=60, deadline=None)
@given(dags())
def test_random_valid_dags_compile_to_the_same_nodes_and_edges(edges):
    graph = compile_pipeline(build(edges).spec)
    assert set(graph.steps) == {_name(i) for i in range(len(edges))}
    expected = {(input_node("raw") if s == -1 else _name(s), "" if s == -1 else "out", _name(i), port)
                for i, sources in enumerate(edges) for port, s in zip("abc", sources)}
    actual = {e for e in graph.edges() if e[2] in graph.steps}
    assert actual == expected


COMPONENTS = [load, split_data, fit, score, compare, passthrough]
NAMES = ["raw", "table", "train", "test", "model", "seed", "epochs", "optimizer", "mode", "a",
         "b", "data", "out", "report", "rows", "ratio", "baseline", "nonsense"]
VALUES = st.one_of(st.integers(-5, 500), st.floats(-1, 2), st.booleans(), st.none(),
                   st.sampled_from(["adam", "sgd", "fast", "x", "data/raw"]))


@st.composite
def messy_pipelines(draw):
    plan = []
    for i in range(draw(st.integers(1, 12))):
        comp = draw(st.sampled_from(COMPONENTS))
        kwargs = {}
        for name in draw(st.lists(st.sampled_from(NAMES), max_size=5, unique=True)):
            kind = draw(st.sampled_from(["value", "ref", "whole", "input"])) if i else "value"
            if kind == "value":
                kwargs[name] = ("value", draw(VALUES))
            elif kind == "input":
                kwargs[name] = ("input", draw(st.sampled_from(["raw", "n"])))
            else:
                kwargs[name] = (kind, draw(st.integers(0, i - 1)), draw(st.sampled_from(NAMES)))
        plan.append((comp, kwargs, draw(st.none() | st.sampled_from(["s1", "s2"]))))
    return plan


def build_messy(plan):
    @pipeline
    def messy(raw, n=3):
        handles = []
        scope = {"raw": raw, "n": n}
        for comp, kwargs, name in plan:
            args = {}
            for key, spec in kwargs.items():
                if spec[0] == "value":
                    args[key] = spec[1]
                elif spec[0] == "input":
                    args[key] = scope[spec[1]]
                elif spec[0] == "whole":
                    args[key] = handles[spec[1]]
                else:
                    args[key] = getattr(handles[spec[1]], spec[2])
            handle = comp(**args)
            handles.append(handle.named(name) if name else handle)
        return {"last": handles[-1]}
    return messy


def _assert_well_formed(diagnostics):
    for d in diagnostics:
        assert d.code != "MP001", d.message
        assert CODES[d.code].name == d.name
        assert d.message and d.hint


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messy_pipelines())
def test_checker_never_raises_on_traced_pipelines(plan):
    _, diagnostics = check_pipeline(build_messy(plan).spec)
    _assert_well_formed(diagnostics)


@st.composite
def hand_built(draw):
    n = draw(st.integers(1, 8))
    names = [draw(st.sampled_from(["a", "b", "c", "d"])) for _ in range(n)]
    steps = []
    for i in range(n):
        comp = draw(st.sampled_from(COMPONENTS))
        bindings = []
        for key in draw(st.lists(st.sampled_from(NAMES), max_size=4, unique=True)):
            bindings.append((key, draw(st.one_of(
                st.builds(StepOutput, st.sampled_from(names + ["ghost"]), st.sampled_from(NAMES + [""])),
                st.builds(PipelineInput, st.sampled_from(["raw", "missing"])),
                st.builds(Literal, VALUES)))))
        steps.append(StepSpec(names[i], comp.spec, tuple(bindings)))
    outputs = tuple((f"o{j}", draw(st.builds(StepOutput, st.sampled_from(names + ["ghost"]),
                                                st.sampled_from(NAMES))))
                    for j in range(draw(st.integers(0, 2))))
    return PipelineSpec("hand", (PipelineInputSpec("raw", InputRole.ARTIFACT),), tuple(steps), outputs)


@settings(max_examples=150, deadline=None)
@given(hand_built())
def test_checker_never_raises_on_hand_built_specs(spec):
    _, diagnostics = check_pipeline(spec)
    _assert_well_formed(diagnostics)
