"""mlpipe: pipeline-as-code for Azure Machine Learning, with a lineage and evidence store.

Importing mlpipe never imports azure-ai-ml, SQLAlchemy or torch, and imports none of its own
modules either until a name is first used (PEP 562): ``mlpipe runs`` and the other commands
that only read the store never pay for the DSL, the annotations or the contracts.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mlpipe.version import __version__ as __version__

if TYPE_CHECKING:
    import os
    from collections.abc import Callable

    from mlpipe.annotations import (
        Choices,
        CustomModelFolder,
        Input,
        MLflowModelFolder,
        MLTable,
        Output,
        Param,
        Range,
        UriFile,
        UriFolder,
    )
    from mlpipe.distribution import Mpi, PyTorch, TensorFlow
    from mlpipe.dsl import Candidate, Component, Pipeline, component, pipeline
    from mlpipe.errors import DefinitionError, LoadError, MlpipeError, UsageError
    from mlpipe.secret import Secret
    from mlpipe.spec import Compute, Environment

#: Each public name and the module it is imported from on first use.
_LAZY: dict[str, str] = {
    **dict.fromkeys(["Choices", "CustomModelFolder", "Input", "MLflowModelFolder", "MLTable",
                     "Output", "Param", "Range", "UriFile", "UriFolder"], "mlpipe.annotations"),
    **dict.fromkeys(["Mpi", "PyTorch", "TensorFlow"], "mlpipe.distribution"),
    **dict.fromkeys(["Candidate", "Component", "Pipeline", "component", "pipeline"],
                    "mlpipe.dsl"),
    **dict.fromkeys(["DefinitionError", "LoadError", "MlpipeError", "UsageError"],
                    "mlpipe.errors"),
    "Secret": "mlpipe.secret",
    **dict.fromkeys(["Compute", "Environment"], "mlpipe.spec"),
}


def __getattr__(name: str) -> Any:
    """A public name, imported from its module the first time it is used (then cached here)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'mlpipe' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


def load_component(path: str | os.PathLike[str]) -> Component[Callable[..., Any]]:
    """An Azure ML command component YAML (CLI v2) as an mlpipe component.

    See ``mlpipe.backends.azure.component_yaml.load_component``; imported on first use so
    that ``import mlpipe`` stays light.

    Example:
        >>> train = load_component("components/train.yml")
    """
    from mlpipe.backends.azure.component_yaml import load_component as _load

    return _load(path)


__all__ = [
    "Candidate",
    "Choices",
    "Component",
    "Compute",
    "CustomModelFolder",
    "DefinitionError",
    "Environment",
    "Input",
    "LoadError",
    "MLTable",
    "MLflowModelFolder",
    "MlpipeError",
    "Mpi",
    "Output",
    "Param",
    "Pipeline",
    "PyTorch",
    "Range",
    "Secret",
    "TensorFlow",
    "UriFile",
    "UriFolder",
    "UsageError",
    "component",
    "load_component",
    "pipeline",
]
