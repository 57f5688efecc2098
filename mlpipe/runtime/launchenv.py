"""What the launcher (Azure ML, torchrun, mpirun or mlpipe's local one) tells a step process
about its place in the launch: the integer variables (``RANK``, ``OMPI_COMM_WORLD_RANK`` ...)
and TensorFlow's ``TF_CONFIG``. Read by ``runtime.distributed`` (the step's API) and by
``runtime.record`` (the identity a rank's record carries), the same way in both.
"""
from __future__ import annotations

import json
import os
from typing import Any


def int_var(*names: str) -> int | None:
    """The first of the variables ``names`` that is set to a whole number, or None."""
    for name in names:
        value = os.environ.get(name)
        if value is not None and value.strip().isdigit():
            return int(value)
    return None


def tf_config() -> dict[str, Any] | None:
    """``TF_CONFIG`` as the JSON object it should be; None when unset or not an object."""
    raw = os.environ.get("TF_CONFIG")
    try:
        tf = json.loads(raw) if raw else None
    except ValueError:
        return None
    return tf if isinstance(tf, dict) else None
