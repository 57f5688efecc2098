"""The ``mlpipe`` command line: parse, call the library, render. No logic lives here.

Exit codes: 0 clean, 1 problems found, 2 a file that cannot be loaded or a usage error.
Heavy imports (azure-ai-ml, SQLAlchemy, torch) happen only inside the commands that need them.
One module per command family, imported when one of its commands is run (``base.FAMILIES``):
``checking`` (check, graph, validate), ``running`` (submit, runs, show, logs, diff, store, gc),
``evidence`` (candidates, evidence), ``review`` (qualify, review), ``keys`` (keys generate,
keys show), ``promotion`` (promote, trace), ``rehearsing`` (rehearse), ``azure`` (compile,
environment, sync, and submit's Azure target). Errors are turned into messages and exit codes
once, in ``base``.
"""
from mlpipe.cli.base import main

__all__ = ["main"]
