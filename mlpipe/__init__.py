"""mlpipe: pipeline-as-code for Azure Machine Learning, with a lineage and evidence store.

Importing mlpipe never imports azure-ai-ml, SQLAlchemy or torch.
"""
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
from mlpipe.version import __version__ as __version__


def load_component(path):
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
