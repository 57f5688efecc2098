"""Fields a job declares, in Azure ML YAML and azure-ai-ml Python beside the mlpipe Python
fixtures (tests/fixtures/checks/mp529_declared.py, mp538.py, mp516_serverless.py): launch
variables the job sets (MP529), NCCL kept off InfiniBand (MP538), outputs bound to a fixed
storage path (MP806), serverless with no VM size for GPU code (MP516), a launcher's process
count (MP503)."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from mlpipe.checks import check_pipeline
from mlpipe.loader import load_spec

JOB = Path(__file__).parents[1] / "fixtures" / "azure" / "command_job"
CORPUS = Path(__file__).parents[1] / "corpus" / "clean" / "yaml" / "ddp_manifest"
DISTRIBUTED = """resources:
  instance_count: 2
  instance_type: Standard_NC24rs_v3
distribution:
  type: pytorch
  process_count_per_instance: 4
"""


def _job(tmp_path: Path, extra: str, code: str, command: str | None = None
         ) -> list[tuple[str, str]]:
    shutil.copytree(JOB, tmp_path / "job")
    text = (JOB / "job.yml").read_text() + extra
    if command is not None:
        text = text.replace("  python main.py --data ${{inputs.data}} --learning-rate "
                            "${{inputs.learning_rate}}\n  --model ${{outputs.model}}\n",
                            f"  {command}\n")
    (tmp_path / "job" / "job.yml").write_text(text)
    spec, found = load_spec(str(tmp_path / "job" / "job.yml"))
    return [(d.code, d.message) for d in [*found, *check_pipeline(spec)[1]] if d.code == code]


@pytest.mark.parametrize(("variables", "flagged"), [
    ("  WORLD_SIZE: '8'\n  RANK: '0'\n", ["RANK"]),      # WORLD_SIZE's value is MP503's
    ("  MASTER_ADDR: 10.0.0.4\n  MASTER_PORT: '6105'\n", ["MASTER_ADDR"]),
    ("  NCCL_DEBUG: INFO\n  OMP_NUM_THREADS: '4'\n", []),
])
def test_a_yaml_job_declaring_launch_variables(tmp_path, variables, flagged):
    found = _job(tmp_path, DISTRIBUTED + "environment_variables:\n" + variables, "MP529")
    assert sorted(m.split(" declares environment variable ")[1].split("=")[0]
                  for _, m in found) == flagged
    for _, message in found:
        assert message.startswith("step 'job' declares environment variable ")
        assert ", which Azure ML sets in each process of its pytorch launch: " in message


@pytest.mark.parametrize(("variables", "size", "flagged"), [
    ("  NCCL_IB_DISABLE: '1'\n", "Standard_NC24rs_v3", True),
    ("  NCCL_NET: Socket\n", "Standard_ND96asr_v4", True),
    ("  NCCL_IB_DISABLE: '0'\n", "Standard_NC24rs_v3", False),
    ("  NCCL_IB_DISABLE: '1'\n", "Standard_NC24s_v3", False),   # no InfiniBand: MP506's
])
def test_a_yaml_job_keeping_nccl_off_infiniband(tmp_path, variables, size, flagged):
    extra = DISTRIBUTED.replace("Standard_NC24rs_v3", size)
    found = _job(tmp_path, extra + "environment_variables:\n" + variables, "MP538")
    assert len(found) == flagged
    if flagged:
        assert found[0][1].startswith(f"step 'job' trains on 2 nodes of {size} (")
        assert "keeps NCCL off InfiniBand: collectives between nodes go over Ethernet" \
            in found[0][1]


@pytest.mark.parametrize(("command", "flagged"), [
    ("horovodrun -np 4 python main.py --model ${{outputs.model}}",
     "step 'job' states a world size of 4 (command 'horovodrun' -np 4) but launches 8 "
     "processes (2 instances x 4 processes per node)"),
    ("horovodrun -np 8 python main.py --model ${{outputs.model}}", None),
    ("python main.py --model ${{outputs.model}}", None),
])
def test_a_launchers_process_count_against_the_launch(tmp_path, command, flagged):
    found = _job(tmp_path, DISTRIBUTED, "MP503", command)
    assert [m for _, m in found] == ([flagged] if flagged else [])


@pytest.mark.parametrize(("processes", "flagged"), [(4, True), (8, False)])
def test_an_accelerate_configuration_against_the_launch(tmp_path, processes, flagged):
    found = _job(tmp_path, DISTRIBUTED, "MP503",
                 "accelerate launch --config_file acc.yaml main.py --model ${{outputs.model}}")
    assert found == []   # the file is not there: nothing stated
    (tmp_path / "job" / "src" / "acc.yaml").write_text(
        f"distributed_type: MULTI_GPU\nnum_machines: 2\nnum_processes: {processes}\n")
    spec, more = load_spec(str(tmp_path / "job" / "job.yml"))
    found = [d.message for d in [*more, *check_pipeline(spec)[1]] if d.code == "MP503"]
    assert len(found) == flagged
    if flagged:
        assert "(accelerate configuration 'acc.yaml': num_processes 4)" in found[0]


@pytest.mark.parametrize(("code", "flagged"), [
    ("import torch\nnet = torch.nn.Linear(4, 2).cuda()\n", True),
    ("import torch\ndevice = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
     "net = torch.nn.Linear(4, 2).to(device)\n", False),
])
def test_a_serverless_yaml_job_without_a_size(tmp_path, code, flagged):
    shutil.copytree(JOB, tmp_path / "job")
    (tmp_path / "job" / "src" / "main.py").write_text(code)
    text = (JOB / "job.yml").read_text().replace("compute: azureml:cpu-cluster\n", "")
    (tmp_path / "job" / "job.yml").write_text(text)
    spec, found = load_spec(str(tmp_path / "job" / "job.yml"))
    found = [d for d in [*found, *check_pipeline(spec)[1]] if d.code == "MP516"]
    assert len(found) == flagged
    if flagged:
        assert found[0].message.startswith(
            "step 'job' runs on serverless compute with no instance_type, so the service's "
            "default VM size runs it, but its code puts work on a GPU whatever is there")
        assert found[0].file.endswith("main.py") and found[0].line == 2
        # with a GPU size declared it is judged as any sized step
        (tmp_path / "job" / "job.yml").write_text(
            text + "resources:\n  instance_type: Standard_NC6s_v3\n")
        spec, again = load_spec(str(tmp_path / "job" / "job.yml"))
        assert [d for d in [*again, *check_pipeline(spec)[1]] if d.code == "MP516"] == []


FIXED = "azureml://datastores/workspaceblobstore/paths/reports/defect/"


@pytest.mark.parametrize(("report", "flagged"), [
    (f"        path: {FIXED}\n", "warning"),
    ("        path: azureml://datastores/workspaceblobstore/paths/reports/${{name}}/\n", None),
    ("", None),
])
def test_a_yaml_pipelines_output_bound_to_a_fixed_path(tmp_path, report, flagged):
    shutil.copytree(CORPUS, tmp_path / "job")
    pipeline = tmp_path / "job" / "pipeline.yml"
    pipeline.write_text(pipeline.read_text().replace(
        "      report: ${{parent.outputs.report}}",
        "      report:\n        type: uri_folder\n" + report.rstrip("\n")).rstrip() + "\n")
    spec, found = load_spec(str(pipeline))
    found = [d for d in [*found, *check_pipeline(spec)[1]] if d.code == "MP806"]
    assert [d.severity.value for d in found] == ([flagged] if flagged else [])
    if flagged:
        assert found[0].message == (
            f"output 'evaluate.report' is bound to the fixed path {FIXED!r}: every run writes "
            f"the same place, so a later run replaces the files an earlier run's evidence "
            f"names")


def test_two_outputs_bound_to_one_path(tmp_path):
    shutil.copytree(CORPUS, tmp_path / "job")
    pipeline = tmp_path / "job" / "pipeline.yml"
    text = pipeline.read_text()
    for part in ("train", "test"):
        text = text.replace(f"      {part}:\n        type: uri_folder\n",
                            f"      {part}:\n        type: uri_folder\n        path: {FIXED}\n")
    pipeline.write_text(text)
    spec, found = load_spec(str(pipeline))
    found = [d for d in [*found, *check_pipeline(spec)[1]] if d.code == "MP806"]
    assert [d.severity.value for d in found] == ["warning", "error"]
    assert found[1].message.startswith(
        f"output 'prepare.test' is bound to {FIXED!r}, as output 'prepare.train' is: two "
        f"outputs write one place")


SDK_PIPELINE = '''
from pathlib import Path

from azure.ai.ml import Input, Output, PyTorchDistribution, command, dsl

HERE = Path(__file__).resolve().parent
train = command(
    name="train", code=HERE / "src", environment="azureml:corpus-pytorch-gpu:5",
    command="python train.py --data ${{{{inputs.data}}}} --model ${{{{outputs.model}}}}",
    inputs={{"data": Input(type="uri_folder")}},
    outputs={{"model": Output(type="uri_folder"{path})}},
    distribution=PyTorchDistribution(process_count_per_instance=4),
    instance_count=2, instance_type="Standard_NC24rs_v3",
    environment_variables={variables},
    tags={{"mlpipe.writers.model": "rank0"}},
)


@dsl.pipeline(default_compute="gpu-cluster")
def pipe():
    fit = train(data=Input(type="uri_folder", path="azureml:images:3"))
    return {{"model": fit.outputs.model}}
'''
SDK_SCRIPT = """import os

import torch.distributed as dist

dist.init_process_group("nccl")
torch_rank = int(os.environ["RANK"])
"""


@pytest.mark.parametrize("mistaken", [True, False])
def test_every_new_field_in_an_azure_ai_ml_python_pipeline(tmp_path, mistaken):
    pytest.importorskip("azure.ai.ml")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text(SDK_SCRIPT)
    module = f"sdk_jobfields_{'mistaken' if mistaken else 'clean'}"
    path = f', path="{FIXED}"' if mistaken else ""
    variables = ({"NCCL_IB_DISABLE": "1", "LOCAL_RANK": "0", "OMP_NUM_THREADS": "24"} if mistaken
                 else {"NCCL_DEBUG": "WARN"})
    (tmp_path / f"{module}.py").write_text(SDK_PIPELINE.format(path=path,
                                                               variables=repr(variables)))
    spec, found = load_spec(f"{tmp_path / module}.py:pipe")
    codes = sorted(d.code for d in [*found, *check_pipeline(spec)[1]]
                   if d.code in ("MP529", "MP538", "MP539", "MP806"))
    assert codes == (["MP529", "MP538", "MP539", "MP806"] if mistaken else [])


@pytest.mark.parametrize(("environment", "data", "flagged"), [
    ("azureml:corpus-cpu@latest", "azureml:defect-images:3", ["environment"]),
    ("azureml:corpus-cpu:3", "azureml:defect-images@latest", ["data"]),
    ("azureml:corpus-cpu:3", "azureml:defect-images:3", []),
])
def test_environments_and_data_by_label_in_yaml(tmp_path, environment, data, flagged):
    shutil.copytree(CORPUS, tmp_path / "job")
    pipeline = tmp_path / "job" / "pipeline.yml"
    text = pipeline.read_text().replace("    path: azureml:defect-images:3\n",
                                        f"    path: {data}\n")
    pipeline.write_text(text.replace("    environment: azureml:corpus-cpu:3\n",
                                     f"    environment: {environment}\n", 1))
    spec, found = load_spec(str(pipeline))
    found = [d.message for d in [*found, *check_pipeline(spec)[1]] if d.code == "MP802"]
    assert [m.split(" ", 1)[0] for m in found] == [
        "environment" if f == "environment" else "pipeline" for f in flagged]
    assert all("by the label 'latest'" in m or "the label 'latest'" in m for m in found)


@pytest.mark.parametrize(("threads", "size", "flagged"), [
    ("'12'", "Standard_NC24rs_v3", True), ("'6'", "Standard_NC24rs_v3", False),
    ("'2'", "Standard_NC6s_v3", True), ("'1'", "Standard_NC6s_v3", False),
])
def test_a_yaml_jobs_threads_against_the_nodes_vcpus(tmp_path, threads, size, flagged):
    extra = DISTRIBUTED.replace("Standard_NC24rs_v3", size)
    found = _job(tmp_path, extra + f"environment_variables:\n  OMP_NUM_THREADS: {threads}\n",
                 "MP539")
    assert len(found) == flagged
    if flagged:
        assert found[0][1].startswith(
            f"step 'job' starts 4 process(es) per node, each told by its environment variable "
            f"OMP_NUM_THREADS={threads} to run ")
