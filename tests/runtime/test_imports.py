"""The runtime, the launcher and the checks never import torch or mlflow on import."""
import subprocess
import sys


def test_no_torch_on_import():
    code = ("import sys, mlpipe, mlpipe.runtime, mlpipe.checks, mlpipe.compute, "
            "mlpipe.backends.local.launcher; "
            "assert 'torch' not in sys.modules, 'torch imported'; "
            "assert 'mlflow' not in sys.modules, 'mlflow imported'")
    subprocess.run([sys.executable, "-c", code], check=True)
