"""Model contracts: the model's signature (input features in order with dtypes, outputs) and
the label map it was trained with; validated against an MLflow ``MLmodel`` file.

Knows nothing of specs. The MLmodel file is YAML, read with PyYAML; an ``MLflowModel`` is
also loaded with MLflow itself (``mlflow.pyfunc.load_model``), imported only when one is
validated, never by ``import mlpipe``.
"""
from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mlpipe.artifacts import AssetType
from mlpipe.contracts.base import Contract, Difference, Reading, check_exists
from mlpipe.contracts.labels import LabelMap, check_encoding, encoding_differences
from mlpipe.contracts.tabular import Column
from mlpipe.errors import ContractError, DefinitionError, UsageError

#: mlpipe dtype -> MLflow column type (mlflow.types.DataType names)
MLFLOW_TYPES = {"int32": "integer", "int64": "long", "float32": "float", "float64": "double",
                "string": "string", "bool": "boolean", "timestamp": "datetime"}
TENSOR_DTYPES = ("float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8",
                 "bool")


@dataclass(frozen=True)
class Tensor:
    """A tensor input or output: numpy dtype and shape (``-1`` for a free dimension).

    Example:
        >>> Tensor("float64", (-1, 64))
    """

    dtype: str
    shape: tuple[int, ...]

    def __post_init__(self) -> None:
        if self.dtype not in TENSOR_DTYPES:
            raise DefinitionError(f"Tensor dtype {self.dtype!r} is not one of "
                                  f"{', '.join(TENSOR_DTYPES)}", hint="use a numpy dtype name")
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))

    def to_dict(self) -> dict[str, Any]:
        return {"dtype": self.dtype, "shape": list(self.shape)}

    def mlflow(self) -> list[dict[str, Any]]:
        return [{"type": "tensor", "tensor-spec": {"dtype": self.dtype, "shape": list(self.shape)}}]

    def __str__(self) -> str:
        return f"tensor {self.dtype}{list(self.shape)}"


def _normalise(value: Any, what: str) -> Any:
    if value is None or isinstance(value, Tensor):
        return value
    cols = tuple(value)
    if not all(isinstance(c, Column) for c in cols):
        raise DefinitionError(f"model {what} must be a Tensor(...) or a list of Column(...), "
                              f"got {value!r}", hint='write [Column("length", "float64"), ...]')
    return cols


def _show(io: Any) -> str:
    if isinstance(io, Tensor):
        return str(io)
    return "[" + ", ".join(f"{c.name}:{c.dtype}" for c in io) + "]"


def _mlflow(io: Any) -> list[dict[str, Any]]:
    if isinstance(io, Tensor):
        return io.mlflow()
    return [{"name": c.name, "type": MLFLOW_TYPES[c.dtype], "required": not c.nullable}
            for c in io]


@dataclass(frozen=True, eq=True)
class ModelSignature(Contract):
    """A trained model: what it reads, what it returns, and the label map it was trained with.

    Args:
        name: the model contract's name.
        inputs: a Tensor, or the input features as Columns in the order the model reads them.
        outputs: a Tensor, or Columns.
        labels: the LabelMap the model's class codes follow.
        version: ``MAJOR`` or ``MAJOR.MINOR``.
        device: where the model's tensors are saved: ``"cpu"`` (loadable on any compute,
            GPU or not) or ``"cuda"`` (loadable only where a GPU is, or with
            ``map_location``); None leaves it unstated. Checked against the MLmodel's
            ``metadata.saved_device`` at run time, and against the compute of the steps
            on both sides of the edge at compile time (MP630).

    Example:
        >>> ModelSignature("scorer", inputs=[Column("length", "float64")], labels=LABELS)
    """

    kind = "model-signature"
    transport = AssetType.CUSTOM_MODEL
    holds_examples = False

    name: str | None = None
    inputs: Any = None
    outputs: Any = None
    labels: LabelMap | None = None
    version: str = "1"
    device: str | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.device not in DEVICES:
            raise DefinitionError(f"model device {self.device!r} is not 'cpu', 'cuda' or None",
                                  hint="declare device='cpu' for tensors saved on the CPU")
        object.__setattr__(self, "inputs", _normalise(self.inputs, "inputs"))
        object.__setattr__(self, "outputs", _normalise(self.outputs, "outputs"))
        if self.labels is not None and not isinstance(self.labels, LabelMap):
            raise DefinitionError(f"model labels must be a LabelMap, got {self.labels!r}",
                                  hint="pass the LabelMap the model was trained with")

    def spec(self) -> dict[str, Any]:
        found = super().spec()
        if found.get("device") is None:
            found.pop("device", None)  # unstated: the digest of a contract without it holds
        return found

    def differences(self, required: Contract) -> Iterator[Difference]:
        assert isinstance(required, ModelSignature)
        if required.device == "cpu" and self.device != "cpu":
            yield Difference(f"the consumer loads the model on the CPU but {self.label} "
                             + ("saves its tensors on cuda" if self.device == "cuda" else
                                "does not say where its tensors are saved"),
                             "save CPU tensors and declare device='cpu' on the producer's "
                             "model contract", "contract-requirement-unmet")
        for what in ("inputs", "outputs"):
            yield from _io_differences(what, getattr(self, what), getattr(required, what),
                                       self.label)
        if required.labels is not None:
            if self.labels is None:
                yield Difference(f"the consumer requires a model trained with "
                                 f"{required.labels.label} but {self.label} names no label map",
                                 "declare labels=... on the producer's model contract",
                                 "label-encoding-mismatch")
            else:
                yield from encoding_differences(self.labels, required.labels, "model labels: ")

    def mlmodel_fields(self) -> dict[str, Any]:
        """The ``signature`` and ``metadata`` entries of an MLmodel file for this contract.

        A step body merges them into the MLmodel it writes (or passes the signature to
        ``mlflow.*.log_model``), so that :meth:`validate` can check the model.
        """
        fields: dict[str, Any] = {}
        signature = {k: json.dumps(_mlflow(v)) for k, v in
                     (("inputs", self.inputs), ("outputs", self.outputs)) if v is not None}
        if signature:
            fields["signature"] = signature
        if self.labels is not None:
            fields["metadata"] = {"label_map": self.labels.encoding}
        if self.device is not None:
            fields.setdefault("metadata", {})["saved_device"] = self.device
        return fields

    def validate(self, path: Path) -> None:
        """Check the model folder's MLmodel: its signature and its recorded label map.

        Raises:
            ContractError: naming the MLmodel file and the input, output or class that differs.
        """
        path = Path(path)
        check_exists(self, path)
        mlmodel = path / "MLmodel"
        needs = self.inputs is not None or self.outputs is not None or self.labels is not None
        if not mlmodel.is_file():
            if needs or self.transport is AssetType.MLFLOW_MODEL:
                raise ContractError(f"the model folder has no MLmodel file; {self.label} "
                                    f"checks the model's signature there",
                                    hint="save the model with MLflow, or write an MLmodel file "
                                         "with the contract's mlmodel_fields()", file=str(path))
            return
        doc = _read_mlmodel(mlmodel, self.label)
        if self.transport is AssetType.MLFLOW_MODEL and not doc.get("flavors"):
            raise ContractError(f"MLmodel declares no flavors; {self.label} is an MLflow model",
                                hint="save the model with an MLflow flavor", file=str(mlmodel),
                                key="flavors")
        signature = doc.get("signature") or {}
        for what in ("inputs", "outputs"):
            want = getattr(self, what)
            if want is None:
                continue
            if what not in signature:
                raise ContractError(f"MLmodel has no signature {what}; {self.label} expects "
                                    f"{_show(want)}", hint="log the model with a signature",
                                    file=str(mlmodel), key=f"signature.{what}")
            _check_io(self.label, mlmodel, what, want, signature[what])
        if self.labels is not None:
            found = (doc.get("metadata") or {}).get("label_map")
            if not isinstance(found, dict):
                raise ContractError(f"MLmodel records no metadata.label_map; {self.label} was "
                                    f"trained with {self.labels.label}",
                                    hint="log the model with metadata={'label_map': {...}}",
                                    file=str(mlmodel), key="metadata.label_map")
            check_encoding(self.labels, found, str(mlmodel))
        if self.device is not None:
            saved = (doc.get("metadata") or {}).get("saved_device")
            if saved is None:
                raise ContractError(f"MLmodel records no metadata.saved_device; {self.label} "
                                    f"says its tensors are saved on {self.device}",
                                    hint=f"write metadata: {{saved_device: {self.device}}} "
                                         f"into MLmodel (mlmodel_fields() has it)",
                                    file=str(mlmodel), key="metadata.saved_device")
            if str(saved).split(":", 1)[0] != self.device:
                raise ContractError(f"the model's tensors were saved on {saved} (MLmodel "
                                    f"metadata.saved_device) but {self.label} says "
                                    f"{self.device}",
                                    hint="move the tensors to the CPU before saving "
                                         "({k: v.cpu() for k, v in state_dict.items()})"
                                    if self.device == "cpu" else
                                    f"declare device={str(saved).split(':', 1)[0]!r}",
                                    file=str(mlmodel), key="metadata.saved_device")


@dataclass(frozen=True, eq=True)
class MLflowModel(ModelSignature):
    """An MLflow model folder (``MLmodel`` plus files) with the signature of ModelSignature.

    Example:
        >>> MLflowModel("defect-softmax", inputs=Tensor("float64", (-1, 64)), labels=LABELS)
    """

    kind = "mlflow-model"
    transport = AssetType.MLFLOW_MODEL
    holds_examples = False
    requires = (("mlflow", "pip install 'mlpipe-aml[models]'"),)

    def validate(self, path: Path) -> None:
        """Check the MLmodel as :meth:`ModelSignature.validate` does, then load the model with
        ``mlflow.pyfunc.load_model`` in this process: what registering or serving it needs.

        Raises:
            ContractError: the MLmodel differs from the contract, has no ``python_function``
                flavor, or the model does not load (naming what is missing).
            UsageError: mlflow is not installed here.
        """
        super().validate(path)
        path = Path(path)
        mlmodel = path / "MLmodel"
        flavor = (_read_mlmodel(mlmodel, self.label).get("flavors") or {}).get("python_function")
        if not isinstance(flavor, dict) or not flavor.get("loader_module"):
            raise ContractError(f"MLmodel has no python_function flavor with a loader_module; "
                                f"{self.label} is an MLflow model that MLflow can load and "
                                f"serve", hint="save the model with an MLflow flavor (they add "
                                "python_function), or write a python_function flavor whose "
                                "loader_module defines _load_pyfunc(path)",
                                file=str(mlmodel), key="flavors.python_function")
        load_with_mlflow(path, self.label, str(flavor["loader_module"]))


DEVICES = (None, "cpu", "cuda")


def load_with_mlflow(path: Path, label: str, loader: str) -> None:
    """Load the model at ``path`` with ``mlflow.pyfunc.load_model``; leave ``sys.path`` and
    ``sys.modules`` as they were (the loader module and its code folder are the model's, not
    the step's).

    Raises:
        ContractError: the model does not load; names the loader module, the missing
            ``_load_pyfunc`` or the loader's own exception.
        UsageError: mlflow is not installed here.
    """
    try:
        import mlflow.pyfunc
    except ImportError as exc:
        raise UsageError(f"validating {label} loads the model with MLflow, which is not "
                         f"installed here ({exc})", hint="pip install 'mlpipe-aml[models]' (and "
                         "install it in the step's environment)") from None
    saved_path, saved_modules = list(sys.path), set(sys.modules)
    mlmodel = str(Path(path) / "MLmodel")
    try:
        mlflow.pyfunc.load_model(str(path), suppress_warnings=True)
    except ModuleNotFoundError as exc:
        raise ContractError(f"the model does not load: its loader_module {loader!r} needs "
                            f"module {exc.name!r}, which is neither in the model's code folder "
                            f"nor installed here; {label} must load with "
                            f"mlflow.pyfunc.load_model",
                            hint="copy the loader module into the model folder and name it in "
                                 "the flavor's code: entry, or install what it imports",
                            file=mlmodel, key="flavors.python_function.loader_module") from None
    except AttributeError as exc:
        if "_load_pyfunc" not in str(exc):
            raise _not_loading(exc, mlmodel, label) from None
        raise ContractError(f"the model does not load: its loader_module {loader!r} defines no "
                            f"_load_pyfunc(path); {label} must load with "
                            f"mlflow.pyfunc.load_model",
                            hint=f"define _load_pyfunc(path) in {loader}, returning an object "
                                 f"with predict(model_input)",
                            file=mlmodel, key="flavors.python_function.loader_module") from None
    except Exception as exc:  # the loader is the user's code: any failure is the model's
        raise _not_loading(exc, mlmodel, label) from None
    finally:
        sys.path[:] = saved_path
        for name in set(sys.modules) - saved_modules:
            module_file = getattr(sys.modules[name], "__file__", None) or ""
            if module_file.startswith(str(Path(path).resolve())) or name == loader:
                del sys.modules[name]


def _not_loading(exc: BaseException, mlmodel: str, label: str) -> ContractError:
    text = str(exc).strip().splitlines()
    return ContractError(f"the model does not load with mlflow.pyfunc.load_model "
                         f"({exc.__class__.__name__}: {text[0] if text else 'no message'}); "
                         f"{label} must load", hint="load the model folder with "
                         "mlflow.pyfunc.load_model and fix what it reports",
                         file=mlmodel, key="flavors.python_function")


def _io_differences(what: str, have: Any, want: Any, label: str) -> Iterator[Difference]:
    if want is None:
        return
    if have is None:
        yield Difference(f"the consumer requires model {what} {_show(want)} but {label} "
                         f"declares none", f"declare {what}=... on the producer's model contract")
        return
    if isinstance(have, Tensor) or isinstance(want, Tensor):
        if have != want:
            kind = ("schema-dtype-mismatch" if isinstance(have, Tensor) and
                    isinstance(want, Tensor) and have.dtype != want.dtype
                    else "contract-requirement-unmet")
            yield Difference(f"model {what} are {_show(have)} but the consumer requires "
                             f"{_show(want)}", f"declare the same {what} on both ports", kind)
        return
    mine = {c.name: c for c in have}
    for col in want:
        if col.name not in mine:
            yield Difference(f"the consumer requires model {what[:-1]} {col.name!r} but the "
                             f"model's {what} are {_show(have)}",
                             f"declare {col.name!r} in the producer's {what}",
                             "schema-column-missing")
        elif mine[col.name].dtype != col.dtype:
            yield Difference(f"model {what[:-1]} {col.name!r} is {mine[col.name].dtype} but the "
                             f"consumer requires {col.dtype}", "declare the same dtype on both "
                             "ports", "schema-dtype-mismatch")
    names = [c.name for c in want]
    extra = [c.name for c in have if c.name not in names]
    if extra:
        yield Difference(f"the model's {what} include {extra[0]!r}, which the consumer does not "
                         f"provide ({_show(want)})", f"declare the same {what} on both ports",
                         "schema-column-missing")
    elif [c.name for c in have] != names and len(have) == len(want):
        yield Difference(f"model {what} are in the order {', '.join(c.name for c in have)} but "
                         f"the consumer requires {', '.join(names)}",
                         f"declare the {what} in the same order on both ports",
                         "feature-order-mismatch")


def _read_mlmodel(mlmodel: Path, label: str) -> dict[str, Any]:
    import yaml

    try:
        with Reading(label, mlmodel):
            doc = yaml.safe_load(mlmodel.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise ContractError(f"MLmodel is not YAML ({exc.__class__.__name__}); {label} reads "
                            f"the model's signature there", hint="rewrite the MLmodel file",
                            file=str(mlmodel), line=mark.line + 1 if mark else None) from None
    if not isinstance(doc, dict):
        raise ContractError(f"MLmodel holds no mapping; {label} reads the model's signature "
                            f"there", hint="rewrite the MLmodel file", file=str(mlmodel))
    for key in ("signature", "metadata"):
        if doc.get(key) is not None and not isinstance(doc[key], dict):
            raise ContractError(f"MLmodel's {key} is a {type(doc[key]).__name__}, not a "
                                f"mapping; {label} reads the model's {key} there",
                                hint="rewrite the MLmodel file", file=str(mlmodel), key=key)
    return doc


def _check_io(label: str, mlmodel: Path, what: str, want: Any, raw: Any) -> None:
    try:
        found = json.loads(raw) if isinstance(raw, str) else raw
    except json.JSONDecodeError:
        found = None
    if not isinstance(found, list):
        raise ContractError(f"signature {what} is not a JSON list; {label} expects "
                            f"{_show(want)}", hint="log the model with an MLflow signature",
                            file=str(mlmodel), key=f"signature.{what}")
    expected = _mlflow(want)
    if isinstance(want, Tensor):
        if found != expected:
            raise ContractError(f"signature {what} are {json.dumps(found)} but {label} "
                                f"expects {_show(want)}", hint=f"log the model with {what} "
                                f"{_show(want)}", file=str(mlmodel), key=f"signature.{what}")
        return
    names = [f.get("name") if isinstance(f, dict) else None for f in found]
    for pos, col in enumerate(want):
        if col.name not in names:
            raise ContractError(f"signature {what} lack {col.name!r} ({col.dtype}); {label} "
                                f"expects {_show(want)}", hint=f"log the model with {what} "
                                f"{_show(want)}", file=str(mlmodel), key=col.name,
                                column=col.name)
        entry = found[names.index(col.name)]
        if entry.get("type") != MLFLOW_TYPES[col.dtype]:
            raise ContractError(f"signature {what[:-1]} {col.name!r} is {entry.get('type')} but "
                                f"{label} expects {MLFLOW_TYPES[col.dtype]} ({col.dtype})",
                                hint="cast the feature before logging the model",
                                file=str(mlmodel), key=col.name, column=col.name)
        if names.index(col.name) != pos:
            order = ", ".join(c.name for c in want)
            raise ContractError(f"signature {what[:-1]} {pos + 1} is {names[pos]!r} but "
                                f"{label} expects {col.name!r} there (order {order})",
                                hint="log the model with its features in the contract's order",
                                file=str(mlmodel), key=col.name, column=col.name)
