"""Every diagnostic code mlpipe publishes, in one table (``pipelines.py`` for MP0xx-MP659,
``records.py`` for MP660-MP999, published through ``book.py``): code, kebab-case name, default
severity and a one-line summary; the checks, the importer, the coordination check, the bundle's
findings and ``--verify`` import their codes from ``mlpipe.codes``, and nothing else publishes
one.

Adding a code: take the next free number of your range (never reuse one), name the constant
after the kebab-case name (``artifact-kind-mismatch`` -> ``ARTIFACT_KIND_MISMATCH``), keep the
table in code order, write its ``docs/checks.md`` section (the why of each code lives there)
and place it in ``docs/rules.md``; tests/test_codes.py, tests/checks/test_docs.py and
tests/test_rules.py hold all of that to account. Imports only diagnostics.
"""
from __future__ import annotations

from mlpipe.codes.book import CODES, explain, named, publish, published  # noqa: F401  (its face)
from mlpipe.codes.pipelines import *  # noqa: F403  (the table's first half, by name)
from mlpipe.codes.records import *  # noqa: F403  (its second half)
from mlpipe.diagnostics import Code, Severity  # noqa: F401  (what it publishes)

ERROR, WARNING, INFO = Severity.ERROR, Severity.WARNING, Severity.INFO
