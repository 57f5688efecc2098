"""mlpipe: pipeline-as-code for Azure Machine Learning, with a lineage and evidence store.

Importing mlpipe never imports azure-ai-ml, SQLAlchemy or torch.
"""
from mlpipe.annotations import Input, Output, Param
from mlpipe.distribution import Mpi, PyTorch, TensorFlow
from mlpipe.dsl import Candidate, Component, Pipeline, component, pipeline
from mlpipe.errors import DefinitionError, LoadError, MlpipeError, UsageError
from mlpipe.spec import Compute, Environment

__version__ = "0.1.0"

__all__ = [
    "Candidate",
    "Component",
    "Compute",
    "DefinitionError",
    "Environment",
    "Input",
    "LoadError",
    "MlpipeError",
    "Mpi",
    "Output",
    "Param",
    "Pipeline",
    "PyTorch",
    "TensorFlow",
    "UsageError",
    "component",
    "pipeline",
]
