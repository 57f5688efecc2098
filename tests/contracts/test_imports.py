"""Contracts stay light: pyarrow is imported only when a table is validated."""
import subprocess
import sys


def test_importing_contracts_does_not_import_pyarrow():
    code = ("import sys, mlpipe, mlpipe.contracts, mlpipe.checks; "
            "print(sorted(m for m in ('pyarrow', 'azure.ai.ml', 'sqlalchemy', 'torch') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
