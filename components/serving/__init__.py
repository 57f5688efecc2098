"""The example models' MLflow loaders: each module is copied into the model folder it loads
(``code/``) and named by the MLmodel's ``python_function`` flavor, so ``mlflow.pyfunc.load_model``
and ``mlflow models serve`` load the model without this package. ``write_pyfunc`` writes them.
"""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent


def write_pyfunc(out: Path, loader: str, fields: dict[str, Any], **extra: Any) -> None:
    """Write ``out/MLmodel`` with a ``python_function`` flavor whose loader is
    ``components/serving/<loader>.py``, copied to ``out/code/``; ``fields`` are the contract's
    ``mlmodel_fields()``, ``extra`` more top-level MLmodel entries.

    Example:
        >>> write_pyfunc(Path(model), "defect_softmax", MODEL.mlmodel_fields())
    """
    import yaml  # the body's library: imported where the step runs

    (out / "code").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(HERE / f"{loader}.py", out / "code" / f"{loader}.py")
    (out / "MLmodel").write_text(yaml.safe_dump({
        "flavors": {"python_function": {"loader_module": loader, "code": "code"}},
        **extra, **fields}, sort_keys=False))
