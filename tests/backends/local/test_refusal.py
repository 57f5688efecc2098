"""The executor itself refuses a pipeline with check errors, whoever calls it: nothing runs and
nothing is recorded, not even a run."""
from __future__ import annotations

import pytest

from fixtures.checks import mp202, mp301
from mlpipe.backends.local.executor import LocalExecutor
from mlpipe.codes import UNREADABLE_BINDING_EXPRESSION
from mlpipe.diagnostics import ChecksFailed, Diagnostic
from mlpipe.evidence.storage.config import StoreConfig
from mlpipe.graph import compile_pipeline


def _executor(tmp_path) -> LocalExecutor:
    home = tmp_path / "evidence"
    return LocalExecutor(StoreConfig(f"sqlite:///{home / 'store.sqlite'}", home), stream=None)


def test_a_graph_with_a_check_error_is_refused_before_anything_is_recorded(tmp_path):
    graph = compile_pipeline(mp301.bad.spec)
    with pytest.raises(ChecksFailed, match=r"^the pipeline has check errors; nothing was run$") \
            as refused:
        _executor(tmp_path).submit(graph, inputs={}, params={})
    assert [d.code for d in refused.value.diagnostics if d.severity.value == "error"] == ["MP301"]
    assert refused.value.exit_code == 1
    assert not (tmp_path / "evidence").exists()


def test_the_caller_cannot_hide_the_graph_checks(tmp_path):
    # diagnostics=() is not "no errors": the executor checks the graph itself
    graph = compile_pipeline(mp202.bad.spec)
    with pytest.raises(ChecksFailed) as refused:
        _executor(tmp_path).submit(graph, inputs={}, params={}, diagnostics=())
    assert "MP202" in {d.code for d in refused.value.diagnostics}


def test_an_error_found_while_loading_is_refused_too(tmp_path):
    graph = compile_pipeline(mp301.good.spec)
    loaded = Diagnostic.of(UNREADABLE_BINDING_EXPRESSION, "job 'a' input 'x' is ${{oops}}")
    with pytest.raises(ChecksFailed) as refused:
        _executor(tmp_path).submit(graph, inputs={}, params={}, diagnostics=[loaded])
    assert refused.value.diagnostics[0] is loaded
    assert not (tmp_path / "evidence").exists()


def test_submit_prints_every_diagnostic_then_one_refusal_and_exits_1(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from mlpipe.cli import main

    target = f"{mp301.__file__}:bad"
    monkeypatch.setenv("MLPIPE_HOME", str(tmp_path / "evidence"))
    monkeypatch.setenv("MLPIPE_STORE_URL", f"sqlite:///{tmp_path / 'store.sqlite'}")
    result = CliRunner().invoke(main, ["submit", target, "--input", "raw=."])
    assert result.exit_code == 1
    assert result.output.startswith("error[MP301] artifact-kind-mismatch: 'compare.b' expects ")
    assert result.output.endswith("\nerror: the pipeline has check errors; nothing was run\n")
    assert not (tmp_path / "store.sqlite").exists()
