"""mlpipe's version: the one place it is written (pyproject.toml reads it from here)."""

__version__ = "0.1.0"
#: The name mlpipe is installed by (``pip install mlpipe-aml``); the package index gives
#: ``mlpipe`` to an unrelated project. The import name and the command are ``mlpipe``.
DISTRIBUTION = "mlpipe-aml"
