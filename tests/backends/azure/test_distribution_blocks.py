"""A job's ``distribution`` block, read at least as strictly as azure-ai-ml reads it, and said
more plainly: each block azure-ai-ml's real ``load_job`` refuses is refused when mlpipe reads it
(a field its type does not have) or reported as an error by the checks (a library named as the
type is MP510); a component's extra field, which azure-ai-ml keeps, stays readable."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from mlpipe.checks import check_pipeline
from mlpipe.errors import LoadError
from mlpipe.loader import load_spec

BLOCKS = [
    ({"type": "pytorch", "process_count": 4}, "has field(s) 'process_count', which a pytorch "
     "distribution does not have"),
    ({"type": "tensorflow", "worker_count": 2, "process_count_per_instance": 2},
     "has field(s) 'process_count_per_instance', which a tensorflow distribution"),
    ({"type": "mpi", "process_count_per_instance": 2, "workers": 2}, "has field(s) 'workers'"),
    ({"type": "deepspeed", "process_count_per_instance": 4}, "MP510"),
    ({"type": "Horovod"}, "MP510"),
]
GOOD = [{"type": "pytorch", "process_count_per_instance": 4},
        {"type": "PyTorch", "process_count_per_instance": 4},
        {"type": "tensorflow", "worker_count": 2, "parameter_server_count": 0},
        {"type": "mpi", "process_count_per_instance": 4}]


def _job(tmp_path: Path, block: dict) -> Path:
    (tmp_path / "src").mkdir(exist_ok=True)
    (tmp_path / "src" / "train.py").write_text("print('train')\n")
    path = tmp_path / "job.yml"
    path.write_text(yaml.safe_dump({
        "$schema": "https://azuremlschemas.azureedge.net/latest/commandJob.schema.json",
        "type": "command", "code": "src", "command": "python train.py",
        "environment": "azureml:AzureML-acpt-pytorch-2.2-cuda12.1:5",
        "compute": "azureml:gpu-cluster", "distribution": block,
        "resources": {"instance_count": 2, "instance_type": "Standard_NC24rs_v3"}}))
    return path


def _azure_refuses(path: Path) -> bool:
    from azure.ai.ml import load_job

    try:
        load_job(str(path))
    except Exception:
        return True
    return False


@pytest.mark.parametrize("block, said", BLOCKS)
def test_what_azure_ai_ml_refuses_mlpipe_refuses_or_reports_as_an_error(tmp_path, block, said):
    path = _job(tmp_path, block)
    assert _azure_refuses(path)
    if said.startswith("MP"):
        spec, found = load_spec(str(path))
        errors = [d for d in found + check_pipeline(spec)[1] if d.severity.value == "error"]
        assert said in [d.code for d in errors]
        assert "is a library in the training script" in next(
            d.message for d in errors if d.code == said)
    else:
        with pytest.raises(LoadError, match=said.replace("(", r"\(").replace(")", r"\)")):
            load_spec(str(path))


@pytest.mark.parametrize("block", GOOD)
def test_what_azure_ai_ml_accepts_mlpipe_reads(tmp_path, block):
    path = _job(tmp_path, block)
    assert not _azure_refuses(path)
    spec, _ = load_spec(str(path))
    assert spec.steps[0].target.distribution is not None


def test_a_components_extra_distribution_field_stays_readable(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text("print('train')\n")
    (tmp_path / "train.yml").write_text(yaml.safe_dump({
        "$schema": "https://azuremlschemas.azureedge.net/latest/commandComponent.schema.json",
        "name": "train", "version": "1", "type": "command", "code": "src",
        "command": "python train.py", "environment": "azureml:AzureML-acpt-pytorch-2.2-cuda12.1:5",
        "distribution": {"type": "mpi", "process_count_per_instance": 1, "added_property": 7}}))
    (tmp_path / "pipeline.yml").write_text(yaml.safe_dump({
        "$schema": "https://azuremlschemas.azureedge.net/latest/pipelineJob.schema.json",
        "type": "pipeline", "jobs": {"train": {"type": "command", "component": "./train.yml"}}}))
    spec, _ = load_spec(str(tmp_path / "pipeline.yml"))
    assert spec.steps[0].target.distribution is not None
