"""The decorator DSL: what a declaration records, and definition errors with file and line."""
import enum
import inspect

import pytest

from mlpipe import (
    Candidate,
    Compute,
    DefinitionError,
    Environment,
    Input,
    Output,
    Param,
    PyTorch,
    component,
    pipeline,
)
from mlpipe.artifacts import AssetType
from mlpipe.spec import InputRole, Literal, ParamType, PipelineInput, StepOutput


def _line(fn, text: str) -> int:
    lines, start = inspect.getsourcelines(fn)
    for i, line in enumerate(lines):
        if text in line:
            return start + i
    raise AssertionError(f"{text!r} not in {fn.__name__}")


def _at(err: DefinitionError, fn, text: str) -> None:
    assert err.file.endswith("tests/test_dsl.py"), err.file
    assert err.line == _line(fn, text)


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


@component(version="1.3.0", environment=Environment("env", version="4", image="img:1"),
           compute=Compute("gpu", sku="Standard_NC24rs_v3"),
           distribution=PyTorch(processes_per_node=4), instances=2,
           environment_variables={"A": "1"}, description="makes things", display_name="Make")
def make(raw: Input["uri_folder"], out: Output["mlflow_model"], extra: Input["uri_file"] = None,
         n: Param[int, 1:200] = 10, rate: Param[float, 0.0:] = 0.5,
         opt: Param[str, ["a", "b"]] = "a", color: Param[Color] = Color.RED,
         flag: bool = False, seed: Param[int, "the seed"] = 3, *, required: Param[str]):
    """Docstring, not digested."""
    return raw


@component
def use(model: Input["mlflow_model"], report: Output["uri_file"]):
    return model


def test_component_records_everything_declared():
    s = make.spec
    assert (s.name, s.version, s.display_name, s.description) == ("make", "1.3.0", "Make",
                                                                  "makes things")
    assert [(p.name, p.kind, p.optional) for p in s.inputs] == [
        ("raw", AssetType.URI_FOLDER, False), ("extra", AssetType.URI_FILE, True)]
    assert [(p.name, p.kind) for p in s.outputs] == [("out", AssetType.MLFLOW_MODEL)]
    params = {p.name: p for p in s.params}
    assert (params["n"].type, params["n"].minimum, params["n"].maximum, params["n"].default) == (
        ParamType.INT, 1, 200, 10)
    assert (params["rate"].minimum, params["rate"].maximum) == (0.0, None)
    assert params["opt"].choices == ("a", "b")
    assert params["color"].type is ParamType.ENUM and params["color"].choices == ("red", "blue")
    assert params["color"].default == "red"
    assert params["flag"].type is ParamType.BOOL and params["flag"].default is False
    assert params["seed"].description == "the seed"
    assert params["required"].required and params["required"].default is None
    assert s.environment == Environment("env", version="4", image="img:1")
    assert s.compute == Compute("gpu", sku="Standard_NC24rs_v3")
    assert (s.instances, s.distribution) == (2, PyTorch(processes_per_node=4))
    assert s.environment_variables == (("A", "1"),)
    assert s.doc == "Docstring, not digested."
    assert s.location.file.endswith("tests/test_dsl.py")
    assert s.location.line == _line(make.fn, "def make(")
    assert s.digest.startswith("sha256:") and len(s.digest) == 71


def test_the_plain_function_stays_reachable_and_callable():
    assert make.fn("some/path", "out", required="x") == "some/path"
    assert make.__name__ == "make" and make.__doc__ == "Docstring, not digested."


@pipeline(name="outer-pipe")
def wiring(raw, epochs: Param[int, 1:10] = 3, plain=2.5):
    m = make(raw=raw, n=epochs, required="x")
    u = use(model=m.out)
    use(model=m.outputs["out"]).named("use_again")
    use(model=m.out)
    return Candidate(model=m.out, evaluation=u.report, name="cand")


def test_pipeline_traces_steps_bindings_inputs_and_outputs():
    s = wiring.spec
    assert [st.name for st in s.steps] == ["make", "use", "use_again", "use_2"]
    assert s.step("make").bindings == (("raw", PipelineInput("raw")), ("n", PipelineInput("epochs")),
                                       ("required", Literal("x")))
    assert s.step("use").binding("model") == StepOutput("make", "out")
    assert s.step("use_again").explicit_name
    inputs = {i.name: i for i in s.inputs}
    assert inputs["raw"].role is InputRole.ARTIFACT and inputs["raw"].kind is AssetType.URI_FOLDER
    assert inputs["epochs"].role is InputRole.PARAM and inputs["epochs"].param.maximum == 10
    assert inputs["plain"].role is InputRole.PARAM and inputs["plain"].default == 2.5
    assert s.outputs == (("model", StepOutput("make", "out")), ("evaluation", StepOutput("use", "report")))
    assert (s.candidate.model, s.candidate.evaluation, s.candidate.name) == ("model", "evaluation", "cand")
    assert s.step("make").location.line == _line(wiring.fn, "m = make(")


def test_pipeline_spec_is_traced_once():
    assert wiring.spec is wiring.spec


@pipeline
def inner(data):
    return {"model": make(raw=data, required="y").out}


@pipeline
def outer(raw):
    a = inner(data=raw)
    b = inner(data=raw).named("second")
    return {"r1": use(model=a.model).report, "r2": use(model=b.model).report}


def test_pipelines_nest_as_steps():
    s = outer.spec
    assert [st.name for st in s.steps] == ["inner", "second", "use", "use_2"]
    assert s.step("inner").target is inner.spec
    assert s.step("use").binding("model") == StepOutput("inner", "model")


# --- definition errors: each names the user's file and line and says how to fix it -----------

def test_unannotated_parameter():
    with pytest.raises(DefinitionError, match=r"parameter 'x' of component 'bad' has no "
                                              r"annotation\n  help: annotate it as Input") as info:
        @component
        def bad(x):
            pass
    _at(info.value, test_unannotated_parameter, "def bad(x):")


def test_output_with_a_default():
    with pytest.raises(DefinitionError, match=r"output 'out' of component 'bad' has a default "
                                              r"\(None\); an output is a path mlpipe provides\n"
                                              r"  help: remove the default") as info:
        @component
        def bad(out: Output["uri_folder"] = None):
            pass
    _at(info.value, test_output_with_a_default, "def bad(out")


def test_input_with_a_non_none_default():
    with pytest.raises(DefinitionError, match=r"input 'x' of component 'bad' has the default "
                                              r"'data/'; an input's default can only be None"):
        @component
        def bad(x: Input["uri_folder"] = "data/"):
            pass


def test_component_called_outside_a_pipeline():
    with pytest.raises(DefinitionError, match=r"component 'use' was called outside a pipeline\n"
                                              r"  help: call it inside a @pipeline function; to "
                                              r"run the body directly, call use.fn\(...\)") as info:
        use(model="m")
    _at(info.value, test_component_called_outside_a_pipeline, 'use(model="m")')


def test_pipeline_called_outside_a_pipeline():
    with pytest.raises(DefinitionError, match=r"pipeline 'inner' was called outside a pipeline"):
        inner(data="x")


@pytest.mark.parametrize("name", ["Prepare", "prep-data", "1prep", "prép"])
def test_component_name_azure_would_reject(name):
    with pytest.raises(DefinitionError, match=rf"component name '{name}' would be rejected by "
                                              rf"Azure ML \(lowercase letters, digits and "
                                              rf"underscores, starting with a letter\)"):
        component(name=name)(lambda_free)


def lambda_free(x: Input["uri_file"]):
    pass


def test_function_name_azure_would_reject_suggests_a_name():
    with pytest.raises(DefinitionError, match=r"help: pass name='prepare_data' to @component"):
        @component
        def PrepareData(x: Input["uri_file"]):
            pass


def test_step_name_azure_would_reject():
    @pipeline
    def p(raw):
        return {"m": make(raw=raw, required="x").named("Bad-Name").out}
    with pytest.raises(DefinitionError, match=r"step name 'Bad-Name' would be rejected by Azure "
                                              r"ML .*\n  help: use .named\('bad_name'\)") as info:
        p.spec
    _at(info.value, p.fn, '.named("Bad-Name")')


def test_pipeline_name_azure_would_reject():
    with pytest.raises(DefinitionError, match=r"pipeline name 'my pipeline' would be rejected"):
        @pipeline(name="my pipeline")
        def p(raw):
            pass


@pytest.mark.parametrize("annotation, message", [
    ("Input['folder']", r"Input\['folder'\] is not an artifact type; use one of uri_file, "
                        r"uri_folder, mltable, mlflow_model, custom_model"),
    ("Param[list]", r"Param\[list\] is not a parameter type; use int, float, str, bool, an Enum or Secret"),
    ("Param[str, 1:3]", r"a range like 1:200 only constrains an int or float Param"),
    ("Param[int, 5:1]", r"range 5:1 is empty; write it as low:high"),
    ("Param[int, []]", r"a choices list must not be empty"),
    ("Param[int, 3]", r"3 is not a Param constraint"),
    ("dict", r"parameter 'x' of component 'bad' is annotated dict, which mlpipe cannot map"),
])
def test_malformed_annotations(annotation, message):
    namespace = {"Input": Input, "Param": Param, "component": component}
    source = f"@component\ndef bad(x: {annotation}):\n    pass\n"
    with pytest.raises(DefinitionError, match=message):
        exec(compile(source, "<test>", "exec"), namespace)


def test_default_outside_its_range():
    with pytest.raises(DefinitionError, match=r"default of parameter 'n' of component 'bad': 500 "
                                              r"is not in 1:200\n  help: change the default or "
                                              r"the constraint"):
        @component
        def bad(n: Param[int, 1:200] = 500):
            pass


def test_ports_equal_ignoring_case():
    with pytest.raises(DefinitionError, match=r"has ports 'data' and 'Data', which Azure ML "
                                              r"treats as the same name"):
        @component
        def bad(data: Input["uri_file"], Data: Output["uri_file"]):
            pass


def test_var_args():
    with pytest.raises(DefinitionError, match=r"component 'bad' takes \*\*kw; a component's "
                                              r"ports must each be named"):
        @component
        def bad(**kw):
            pass


@pytest.mark.parametrize("options, message", [
    ({"version": ""}, r"has version ''; a version is a non-empty string"),
    ({"instances": 0}, r"has instances=0; the node count is an int >= 1"),
    ({"environment": "env"}, r"has environment 'env', not an Environment"),
    ({"compute": 3}, r"has compute 3, not a Compute or a compute name"),
    ({"distribution": 4}, r"has distribution 4, not PyTorch"),
    ({"distribution": "ray"}, r"has distribution 'ray': distribution type 'ray' "
                                   r"is not pytorch, tensorflow or mpi"),
    ({"environment_variables": {"A": 1}}, r"has environment_variables \{'A': 1\}"),
    ({"reads": "/data/lookup.csv"}, r"has reads='/data/lookup.csv'; declare a list of paths "
                                    r"\(files or folders\)\n  help: pass reads=\["),
    ({"reads": ["ok", ""]}, r"has reads=\['ok', ''\]; declare a list of paths"),
])
def test_bad_component_options(options, message):
    with pytest.raises(DefinitionError, match=message):
        component(**options)(lambda_free)


def test_positional_arguments_to_a_step():
    @pipeline
    def p(raw):
        use(raw)
    with pytest.raises(DefinitionError, match=r"component 'use' was given 1 positional "
                                              r"argument\(s\); steps take inputs and parameters "
                                              r"by name\n  help: write use\(name=value, ...\)"):
        p.spec


def test_unrecordable_literal():
    @pipeline
    def p(raw):
        make(raw=raw, required=object())
    with pytest.raises(DefinitionError, match=r"make\(required=...\): an object value cannot be "
                                              r"passed to a step"):
        p.spec


def test_exception_inside_a_pipeline_function_names_the_user_line():
    @pipeline
    def p(raw):
        return 1 / 0
    with pytest.raises(DefinitionError, match=r"pipeline 'p' raised ZeroDivisionError while "
                                              r"being traced: division by zero") as info:
        p.spec
    _at(info.value, p.fn, "return 1 / 0")
    assert isinstance(info.value.__cause__, ZeroDivisionError)


def test_pipeline_returning_something_else():
    @pipeline
    def p(raw):
        return 42
    with pytest.raises(DefinitionError, match=r"pipeline 'p' returns an int; a pipeline returns "
                                              r"a Candidate, a dict of outputs"):
        p.spec


def test_output_of_another_pipeline():
    handles = {}

    @pipeline
    def first(raw):
        handles["m"] = make(raw=raw, required="x")
        return {"m": handles["m"].out}

    @pipeline
    def second(raw):
        return {"r": use(model=handles["m"].out).report}
    first.spec
    with pytest.raises(DefinitionError, match=r"use\(model=...\) is given an output of step "
                                              r"'make' from another pipeline"):
        second.spec


def test_pipeline_using_itself():
    @pipeline
    def loop(raw):
        return {"x": loop(raw=raw).x}
    with pytest.raises(DefinitionError, match=r"pipeline 'loop' uses itself as a step"):
        loop.spec


def test_decorating_something_that_is_not_a_function():
    with pytest.raises(DefinitionError, match=r"@component decorates a function, not type"):
        component(int)
