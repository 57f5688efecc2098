"""Fields a job declares, in each form it is written in: a command that installs packages as
it runs (MP536) and a DeepSpeed configuration whose batch sizes imply another world size
(MP503), in Azure ML YAML beside the mlpipe Python fixtures (tests/fixtures/checks)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from mlpipe.checks import check_pipeline
from mlpipe.loader import load_spec

JOB = Path(__file__).parents[1] / "fixtures" / "azure" / "command_job"


def _codes(tmp_path: Path, command: str, extra: str = "", files: dict | None = None):
    shutil.copytree(JOB, tmp_path / "job")
    for name, data in (files or {}).items():
        (tmp_path / "job" / "src" / name).write_text(json.dumps(data))
    text = (JOB / "job.yml").read_text()
    text = text.replace("  python main.py --data ${{inputs.data}} --learning-rate "
                        "${{inputs.learning_rate}}\n  --model ${{outputs.model}}\n",
                        f"  {command}\n") + extra
    (tmp_path / "job" / "job.yml").write_text(text)
    spec, found = load_spec(str(tmp_path / "job" / "job.yml"))
    return [(d.code, d.message) for d in [*found, *check_pipeline(spec)[1]]
            if d.code in ("MP503", "MP536")]


@pytest.mark.parametrize(("command", "installs"), [
    ("pip install -r requirements.txt && python main.py --model ${{outputs.model}}",
     "pip install -r requirements.txt "),
    ("python -m pip install timm==0.9.2; python main.py --model ${{outputs.model}}",
     "python -m pip install timm==0.9.2"),
    ("conda install -y scikit-learn && python main.py --model ${{outputs.model}}",
     "conda install -y scikit-learn "),
    ("pip install --no-deps --no-index wheels/x.whl && python main.py --model "
     "${{outputs.model}}", None),                   # from files the code carries
    ("python main.py --model ${{outputs.model}}", None),
])
def test_a_yaml_command_that_installs_as_it_runs(tmp_path, command, installs):
    found = _codes(tmp_path, command)
    assert [c for c, _ in found] == (["MP536"] if installs else [])
    if installs:
        assert found[0][1] == (
            f"step 'job' runs {installs.strip()!r} when it starts: the packages it gets are "
            f"whatever the index serves on the day, not what the environment it declares "
            f"pins, so two runs of one definition may run different software")


DISTRIBUTED = """resources:
  instance_count: 2
distribution:
  type: pytorch
  process_count_per_instance: 4
"""


@pytest.mark.parametrize(("total", "mismatch"), [(64, True), (128, False)])
def test_a_yaml_command_naming_a_deepspeed_configuration(tmp_path, total, mismatch):
    config = {"train_batch_size": total, "train_micro_batch_size_per_gpu": 8,
              "gradient_accumulation_steps": 2}
    found = _codes(tmp_path, "python main.py --deepspeed ds.json --model ${{outputs.model}}",
                   DISTRIBUTED, {"ds.json": config})
    assert [c for c, _ in found] == (["MP503"] if mismatch else [])
    if mismatch:
        assert "states a world size of 4 (DeepSpeed configuration 'ds.json': " \
               "train_batch_size 64 = " in found[0][1]


STAGED = Path(__file__).parents[1] / "corpus" / "clean" / "yaml" / "staged_deepspeed"


@pytest.mark.parametrize(("file", "old", "new", "code", "line"), [
    (None, None, None, None, None),                       # the corpus's correct design
    ("src/ds_config.json", '"train_batch_size": 128', '"train_batch_size": 64', "MP503", None),
    ("src/train.py", "    shutil.copytree(args.examples, staged, dirs_exist_ok=True)\n"
     "dist.barrier()", "    shutil.copytree(args.examples, staged, dirs_exist_ok=True)\n"
     "    dist.barrier()", "MP535", 25),
    ("train.yml", "  --model ${{outputs.model}} --deepspeed ds_config.json",
     "  --model ${{outputs.model}} --deepspeed ds_config.json\n  && pip install wandb",
     "MP536", None),
])
def test_each_observation_on_a_yaml_pipelines_scripts(tmp_path, file, old, new, code, line):
    shutil.copytree(STAGED, tmp_path / "job")
    if file is not None:
        path = tmp_path / "job" / file
        assert old in path.read_text()
        path.write_text(path.read_text().replace(old, new))
    spec, found = load_spec(str(tmp_path / "job" / "pipeline.yml"))
    found = [d for d in [*found, *check_pipeline(spec)[1]] if d.severity.value != "info"]
    assert [d.code for d in found] == ([code] if code else [])
    if line is not None:
        assert (found[0].file.endswith("train.py"), found[0].line) == (True, line)


@pytest.mark.parametrize(("reference", "moves"), [
    ("azureml:corpus_train@latest", "by the label 'latest' (it names whichever version carries "
                                    "it when the job is submitted)"),
    ("azureml:corpus_train", "with no version (Azure ML resolves one when the job is "
                             "submitted)"),
    ("azureml://registries/team/components/corpus_train/labels/latest", "by a label"),
    ("azureml:corpus_train:4", None),
    ("azureml://registries/team/components/corpus_train/versions/4", None),
])
def test_a_registered_component_by_label_or_without_version_moves(tmp_path, reference, moves):
    (tmp_path / "pipeline.yml").write_text(f"""type: pipeline
settings:
  default_compute: azureml:cpu-cluster
inputs:
  raw:
    type: uri_folder
    path: azureml:defect-images:3
jobs:
  train:
    type: command
    component: {reference}
    inputs:
      examples: ${{{{parent.inputs.raw}}}}
""")
    spec, found = load_spec(str(tmp_path / "pipeline.yml"))
    found = [d for d in [*found, *check_pipeline(spec)[1]] if d.code == "MP802"]
    assert len(found) == (moves is not None)
    if moves:
        assert found[0].message.startswith(
            f"step 'train' runs the registered component {reference!r} {moves}")


@pytest.mark.parametrize(("visible", "flagged"), [
    ("'0'", True), ("'0,1'", True), ("'0,1,2,3'", False), ("''", False),
])
def test_a_yaml_jobs_cuda_visible_devices_against_its_processes(tmp_path, visible, flagged):
    shutil.copytree(JOB, tmp_path / "job")
    text = (JOB / "job.yml").read_text() + DISTRIBUTED + (
        f"environment_variables:\n  CUDA_VISIBLE_DEVICES: {visible}\n")
    (tmp_path / "job" / "job.yml").write_text(text)
    spec, found = load_spec(str(tmp_path / "job" / "job.yml"))
    found = [d for d in [*found, *check_pipeline(spec)[1]] if d.code == "MP502"]
    assert len(found) == flagged
    if flagged:
        assert found[0].message.startswith(
            f"step 'job' starts 4 processes per node, but its environment variable "
            f"CUDA_VISIBLE_DEVICES={visible} shows each of them")


SDK_PIPELINE = '''
from pathlib import Path

from azure.ai.ml import Input, Output, PyTorchDistribution, command, dsl

HERE = Path(__file__).resolve().parent
train = command(
    name="train",
    code=HERE / "src",
    command="{command}",
    inputs={{"data": Input(type="uri_folder")}},
    outputs={{"model": Output(type="uri_folder")}},
    environment="azureml:AzureML-pytorch-gpu:3",
    distribution=PyTorchDistribution(process_count_per_instance=4),
    instance_count=1,
    environment_variables={{"CUDA_VISIBLE_DEVICES": "{visible}"}},
    tags={{"mlpipe.writers.model": "rank0"}},
)


@dsl.pipeline(default_compute="gpu-cluster")
def pipe():
    fit = train(data=Input(type="uri_folder", path="azureml:images:3"))
    return {{"model": fit.outputs.model}}
'''
SDK_SCRIPT = """import torch.distributed as dist

dist.init_process_group("nccl")
if dist.get_rank() == 0:
    print("saving")
{barrier}dist.barrier()
"""


@pytest.mark.parametrize("mistaken", [True, False])
def test_every_field_in_an_azure_ai_ml_python_pipeline(tmp_path, mistaken):
    pytest.importorskip("azure.ai.ml")
    run = "python train.py --data ${{inputs.data}} --model ${{outputs.model}}"
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text(SDK_SCRIPT.format(
        barrier="    " if mistaken else ""))
    module = f"sdk_pipe_{'mistaken' if mistaken else 'clean'}"   # one import name each
    (tmp_path / f"{module}.py").write_text(SDK_PIPELINE.format(
        command=("pip install timm && " if mistaken else "") + run,
        visible="0" if mistaken else "0,1,2,3"))
    spec, found = load_spec(f"{tmp_path / module}.py:pipe")
    codes = sorted(d.code for d in [*found, *check_pipeline(spec)[1]]
                   if d.code in ("MP502", "MP535", "MP536"))
    assert codes == (["MP502", "MP535", "MP536"] if mistaken else [])


FSDP = Path(__file__).parents[1] / "corpus" / "clean" / "yaml" / "fsdp_serverless"


@pytest.mark.parametrize(("old", "new", "code"), [
    (None, None, None),   # the corpus's correct design: every rank gathers, rank 0 saves
    ("    state = model.state_dict()   # every rank: the gather is a collective\n"
     "if dist.get_rank() == 0:\n",
     "    pass\nif dist.get_rank() == 0:\n    state = model.state_dict()\n", "MP535"),
    ("    torch.save(state, Path(args.model) / \"model.pt\")\ndist.barrier()",
     "    torch.save(state, Path(args.model) / \"model.pt\")\n    dist.barrier()", "MP535"),
])
def test_fsdps_gathered_state_dict_is_a_collective(tmp_path, old, new, code):
    shutil.copytree(FSDP, tmp_path / "job")
    if old is not None:
        path = tmp_path / "job" / "src" / "train.py"
        assert old in path.read_text()
        path.write_text(path.read_text().replace(old, new))
    spec, found = load_spec(str(tmp_path / "job" / "pipeline.yml"))
    found = [d.code for d in [*found, *check_pipeline(spec)[1]] if d.severity.value != "info"]
    assert found == ([code] if code else [])
