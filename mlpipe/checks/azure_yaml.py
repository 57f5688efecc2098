"""Azure ML YAML import codes (MP6xx): problems only a pipeline read from CLI v2 YAML can have.

The importer (``mlpipe.backends.azure.importer``) finds them while reading the YAML and
returns them beside the spec; the graph checks then judge the pipeline like any other.
"""
from __future__ import annotations

from mlpipe.diagnostics import Severity, register_code

BAD_EXPRESSION = register_code(
    "MP601", "unreadable-binding-expression", Severity.ERROR,
    "A job input or output is a ${{...}} expression that is not a parent input, a sibling "
    "job's output or a parent output.")
OUTPUT_NOT_PRODUCED = register_code(
    "MP602", "pipeline-output-not-produced", Severity.ERROR,
    "A pipeline declares an output that no job binds to.")
