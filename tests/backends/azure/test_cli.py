"""`mlpipe compile` and `mlpipe check|graph` on YAML, through the real command line."""
import pathlib

from click.testing import CliRunner

from mlpipe.cli import main

ROOT = pathlib.Path(__file__).resolve().parents[3]
YAML = ROOT / "tests" / "fixtures" / "azure" / "yaml"


def test_compile_writes_validated_yaml_and_says_how_to_submit(tmp_path):
    out = tmp_path / "build"
    result = CliRunner().invoke(main, ["compile", str(ROOT / "pipelines" / "defect_classifier.py"),
                                       "-o", str(out), "--input", "raw=azureml:raw:1"])
    assert result.exit_code == 0, result.output
    assert f"wrote {out / 'pipeline.yml'} and 3 component file(s)" in result.output
    assert "(validated by azure-ai-ml)" in result.output
    assert "must have mlpipe installed" in result.output
    assert f"submit with: az ml job create --file {out / 'pipeline.yml'}" in result.output
    assert sorted(p.name for p in (out / "components").iterdir()) == [
        "evaluate.yml", "prepare.yml", "train.yml"]


def test_compile_refuses_a_pipeline_with_errors_and_writes_nothing(tmp_path):
    result = CliRunner().invoke(main, ["compile", str(YAML / "cycle.yml"), "-o",
                                       str(tmp_path / "out")])
    assert result.exit_code == 1
    assert "error[MP101] dependency-cycle" in result.output
    assert "nothing written; fix the errors above first" in result.output
    assert not (tmp_path / "out").exists()


def test_compile_usage_errors_exit_2(tmp_path):
    result = CliRunner().invoke(main, ["compile", str(ROOT / "pipelines" / "defect_classifier.py"),
                                       "-o", str(tmp_path), "--input", "raw"])
    assert result.exit_code == 2
    assert "error: --input 'raw' is not NAME=VALUE" in result.output
    result = CliRunner().invoke(main, ["compile", str(YAML / "unreadable.yml"), "-o",
                                       str(tmp_path)])
    assert result.exit_code == 2
    assert "3 problems mlpipe cannot read" in result.output
    assert "job 'publish' has type 'magic', which is not an Azure ML job type" in result.output


def test_check_and_graph_accept_pipeline_yaml():
    result = CliRunner().invoke(main, ["check", str(YAML / "wrong_port.yml")])
    assert result.exit_code == 1 and "error[MP103] unknown-port" in result.output
    result = CliRunner().invoke(main, ["graph", str(YAML / "pipeline.yml")])
    assert result.exit_code == 0 and "evaluate.score" in result.output


def test_compile_prints_no_azure_ai_ml_chatter(tmp_path):
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "mlpipe.cli", "compile",
                           str(ROOT / "pipelines" / "defect_classifier.py"), "-o",
                           str(tmp_path / "build"), "--input", "raw=azureml:raw:1",
                           "--input", "split=azureml:split:1"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert "experimental" not in done.stdout
