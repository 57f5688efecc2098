"""The command an exported function component runs on Azure ML, and how to read it back.

A function component's body runs through mlpipe's step runtime inside the component's
environment (which must therefore have mlpipe installed)::

    python -m mlpipe.runtime.step --component MODULE:QUALNAME --digest SHA256
        --input NAME=PATH ... --output NAME=PATH ... --param NAME=VALUE ...
        --record ${{outputs.mlpipe_record}}

The step record (docs/step-record.md) travels back in ``mlpipe_record``, an output the export
adds to every function component; ``sync`` downloads it.

Azure ML substitutes ``${{inputs.X}}``/``${{outputs.X}}`` before the command starts; an
optional input or parameter sits in ``$[[...]]`` so Azure ML drops it when it is not given.
``mlpipe.runtime.argv.parse_step_argv`` reads this form back inside the step. Nothing here
imports azure-ai-ml.
"""
from __future__ import annotations

from mlpipe.runtime.argv import RUNTIME_MODULE, StepArgs, coerce_param, parse_step_argv
from mlpipe.spec import ComponentSpec

#: The output the export adds to every function component for its step record.
RECORD_PORT = "mlpipe_record"


def runtime_command(spec: ComponentSpec) -> str:
    """The ``command:`` of a function component's exported YAML.

    Args:
        spec: a component declared with ``@component`` (``spec.function`` is set).

    Returns:
        One line; every input, output and parameter passed by name.

    Example:
        >>> runtime_command(prepare.spec)[:62]
        'python -m mlpipe.runtime.step --component components.defect:p'
    """
    parts = [f"python -m {RUNTIME_MODULE} --component {spec.function} --digest {spec.digest}"]
    for port in spec.inputs:
        parts.append(_optional(f'--input "{port.name}=${{{{inputs.{port.name}}}}}"', port.optional))
    for port in spec.outputs:
        parts.append(f'--output "{port.name}=${{{{outputs.{port.name}}}}}"')
    for param in spec.params:
        optional = not param.required and param.default is None
        parts.append(_optional(f'--param "{param.name}=${{{{inputs.{param.name}}}}}"', optional))
    parts.append(f'--record "${{{{outputs.{RECORD_PORT}}}}}"')
    return " ".join(parts)


def _optional(text: str, optional: bool) -> str:
    return f"$[[{text}]]" if optional else text


__all__ = ["RECORD_PORT", "RUNTIME_MODULE", "StepArgs", "coerce_param", "parse_step_argv",
           "runtime_command"]
