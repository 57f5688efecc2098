"""Compiling specs into the flattened DAG, with every binding resolved."""
from hypothesis import given
from hypothesis import strategies as st

from fixtures.components import fit, load, passthrough, score, split_data
from mlpipe import Input, Output, component, pipeline
from mlpipe.checks import check_pipeline
from mlpipe.graph import (
    Dangling,
    FromInput,
    FromLiteral,
    FromStep,
    Unbound,
    compile_pipeline,
    input_node,
    output_node,
)


@pipeline
def features(raw, rows=20):
    s = split_data(table=load(raw=raw, rows=rows).table)
    return {"train": s.train, "test": s.test}


@pipeline
def training(raw):
    f = features(raw=raw)
    m = fit(train=f.train, seed=1)
    return {"report": score(model=m.model, test=f.test).report}


def test_nested_pipelines_are_flattened_with_qualified_ids():
    g = compile_pipeline(training.spec)
    assert set(g.steps) == {"features.load", "features.split_data", "fit", "score"}
    assert g.steps["fit"].bindings["train"] == FromStep("features.split_data", "train")
    assert g.steps["features.load"].bindings["raw"] == FromInput("raw")
    assert g.steps["features.load"].bindings["rows"] == FromLiteral(20)
    assert g.steps["features.load"].scope == ("features",)
    assert set(g.dag.edges()) == {
        (input_node("raw"), "features.load"), ("features.load", "features.split_data"),
        ("features.split_data", "fit"), ("features.split_data", "score"), ("fit", "score"),
        ("score", output_node("report"))}
    assert check_pipeline(training.spec)[1] == []


def test_edges_carry_their_ports():
    g = compile_pipeline(training.spec)
    assert ("features.split_data", "test", "score", "test") in set(g.edges())
    assert ("fit", "model", "score", "model") in set(g.edges())


@pipeline
def leaves_inner_unbound(raw):
    f = features()
    return {"train": f.train, "test": f.test}


def test_an_unbound_input_of_a_nested_pipeline_is_reported_at_the_inner_step():
    g, diagnostics = check_pipeline(leaves_inner_unbound.spec)
    assert isinstance(g.steps["features.load"].bindings["raw"], Unbound)
    [d] = [d for d in diagnostics if d.code == "MP102"]
    assert d.step == "features.load"
    assert "step 'features' (pipeline 'features') leaves its input 'raw' unbound" in d.message


@pipeline
def wrong_inner_output(raw):
    f = features(raw=raw)
    return {"x": fit(train=f.trian, seed=1).model, "t": f.train, "u": f.test}


def test_a_missing_output_of_a_nested_pipeline_dangles():
    g, diagnostics = check_pipeline(wrong_inner_output.spec)
    assert g.steps["fit"].bindings["train"] == Dangling(
        "nested pipeline step 'features' has no output 'trian'")
    assert [d.code for d in diagnostics] == ["MP111"]


@component
def one_out(data: Input["uri_folder"], out: Output["uri_folder"]):
    pass


@pipeline
def whole_step(raw):
    a = one_out(data=raw)
    return {"b": passthrough(data=a).out}


def test_a_step_with_one_output_may_be_passed_whole():
    g, diagnostics = check_pipeline(whole_step.spec)
    assert g.steps["passthrough"].bindings["data"] == FromStep("one_out", "out")
    assert diagnostics == []


def _networkx_order(g):
    # what the checks saw when they walked a networkx MultiDiGraph built edge by edge
    import networkx as nx

    dag = nx.MultiDiGraph()
    for node, attrs in g.links.nodes.items():
        dag.add_node(node, **attrs)
    for u, v, key, data in g.links.edges():
        dag.add_edge(u, v, key=key, **data)
    return [(u, v, k, d) for u, v, k, d in dag.edges(keys=True, data=True)]


def test_links_keep_networkx_order_and_build_the_same_dag():
    from pipelines.defect_classifier import defect_classifier

    for spec in (training.spec, defect_classifier.spec):
        g = compile_pipeline(spec)
        assert g._dag is None  # nothing built networkx's graph yet
        assert list(g.links.edges()) == _networkx_order(g)
        assert list(g.dag.edges(keys=True, data=True)) == list(g.links.edges())
        assert list(g.dag.nodes(data=True)) == list(g.links.nodes.items())
        assert all(g.links.out_degree(n) == g.dag.out_degree(n) for n in g.dag.nodes)


@given(st.integers(2, 12).flatmap(lambda n: st.tuples(
    st.just(n), st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)),
                         max_size=3 * n))))
def test_is_acyclic_predecessors_and_descendants_agree_with_networkx(graph):
    import networkx as nx

    from mlpipe.graph import Links

    n, edges = graph
    links = Links()
    for i in range(n):
        links.add_node(f"n{i}")
    for i, (u, v) in enumerate(edges):
        links.add_edge(f"n{u}", f"n{v}", key=str(i))
    assert links.is_acyclic() == nx.is_directed_acyclic_graph(links.to_networkx())
    # what the executor schedules by, without importing networkx: the same as networkx says
    dag, pred = links.to_networkx(), links.predecessors()
    for node in dag.nodes:
        assert pred[node] == set(dag.predecessors(node))
        assert links.descendants(node) == nx.descendants(dag, node)
