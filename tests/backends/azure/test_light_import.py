"""`import mlpipe` (and the export/import modules) never import azure-ai-ml."""
import subprocess
import sys


def test_import_mlpipe_and_the_yaml_modules_stay_light():
    code = ("import sys, mlpipe, mlpipe.backends.azure.export, mlpipe.backends.azure.importer, "
            "mlpipe.backends.azure.sync, mlpipe.cli; "
            "print(sorted(m for m in sys.modules if m.startswith(('azure', 'sqlalchemy', 'torch'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
