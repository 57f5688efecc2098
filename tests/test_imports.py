"""`import mlpipe`, `mlpipe --help` and `mlpipe check` never import azure-ai-ml, SQLAlchemy,
torch or mlflow (not even to digest a component whose body imports torch)."""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PROBE = """
import json, sys
import mlpipe, mlpipe.cli
from click.testing import CliRunner
runner = CliRunner()
assert runner.invoke(mlpipe.cli.main, ["--help"]).exit_code == 0
assert runner.invoke(mlpipe.cli.main, ["check", "pipelines/defect_classifier.py"]).exit_code == 0
assert runner.invoke(mlpipe.cli.main, ["graph", "pipelines/defect_classifier.py"]).exit_code == 0
# the DDP example imports torch inside its step bodies only: taking its code digest must not
assert runner.invoke(mlpipe.cli.main, ["check", "pipelines/defect_classifier_ddp.py"]).exit_code == 0
heavy = sorted(m for m in sys.modules
               if m.split(".")[0] in ("sqlalchemy", "torch", "alembic", "mlflow")
               or m.startswith("azure.ai.ml"))
print(json.dumps(heavy))
"""


def test_light_commands_import_no_heavy_package():
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True,
                         text=True, check=True)
    assert json.loads(out.stdout) == []


def test_public_surface():
    import mlpipe
    assert {"component", "pipeline", "Input", "Output", "Param", "Candidate"} <= set(mlpipe.__all__)
    for name in mlpipe.__all__:
        assert hasattr(mlpipe, name)
