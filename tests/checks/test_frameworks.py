"""Launch contracts across frameworks (MP518, MP509 in a body), GPU sizes without GPU code
(MP519), components no step can import (MP113), and --fail-on."""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from mlpipe import Compute, Environment, Input, Mpi, Output, PyTorch, TensorFlow, component, pipeline
from mlpipe.checks import check_pipeline
from mlpipe.checks.body import body_facts, uses_accelerator
from mlpipe.checks.importable import why_not_importable
from mlpipe.cli import main

ROOT = Path(__file__).resolve().parents[2]
GPU = Compute("gpu-cluster", sku="Standard_NC24rs_v3")
GPU1 = Compute("gpu-cluster", sku="Standard_NC6s_v3")


def _found(spec, code):
    return [d for d in check_pipeline(spec)[1] if d.code == code]


@component(compute=GPU, distribution=TensorFlow(workers=2, writers="rank0"), instances=2,
           environment=Environment("tf", version="1", variables={"WORLD_SIZE": "2"}))
def tf_with_world_size(data: Input["uri_folder"], model: Output["mlflow_model"]):
    pass


@component(compute=GPU, distribution=Mpi(processes_per_node=4, writers="rank0"), instances=2,
           environment_variables={"MASTER_ADDR": "10.0.0.4", "MASTER_PORT": "6000"})
def deepspeed_over_mpi(data: Input["uri_folder"], model: Output["mlflow_model"]):
    pass


@component(compute=GPU, distribution=PyTorch(processes_per_node=4, writers="rank0"))
def ddp_sets_ompi_in_code(data: Input["uri_folder"], model: Output["mlflow_model"]):
    os.environ.update({"OMPI_COMM_WORLD_RANK": "0"})


@component(compute=GPU, distribution=PyTorch(processes_per_node=4, writers="rank0"))
def ddp_starts_torchrun(data: Input["uri_folder"], model: Output["mlflow_model"]):
    os.system("torchrun --nproc_per_node 4 train.py")


@component(compute=GPU1)
def gpu_fit_with_torch(data: Input["uri_folder"], model: Output["mlflow_model"]):
    import torch  # noqa: F401


@component(compute=GPU1)
def gpu_fit_through_local_module(data: Input["uri_folder"], model: Output["mlflow_model"]):
    from fixtures.distributed import ddp_script  # noqa: F401  (a project module importing torch)


@component(compute=GPU1)
def gpu_fit_unknown_library(data: Input["uri_folder"], model: Output["mlflow_model"]):
    import library_not_installed_here  # noqa: F401


def _wrap(comp):
    @pipeline
    def p(data):
        return comp(data=data).model
    return p.spec


def test_a_variable_an_environment_brings_is_foreign_too():
    [d] = _found(_wrap(tf_with_world_size), "MP518")
    assert d.message.startswith("step 'tf_with_world_size' is a TensorFlow job but gets from "
                                "environment 'tf' the variable WORLD_SIZE, part of PyTorch's "
                                "launch contract")
    assert d.hint.startswith("remove WORLD_SIZE; MultiWorkerMirroredStrategy reads TF_CONFIG")


def test_pytorch_variables_on_an_mpi_launch_are_not_foreign():
    # DeepSpeed and Horovod derive MASTER_ADDR from the MPI ranks on an MPI launch
    assert _found(_wrap(deepspeed_over_mpi), "MP518") == []


def test_a_variable_set_in_the_body_is_reported_at_its_line():
    [d] = _found(_wrap(ddp_sets_ompi_in_code), "MP518")
    assert "sets in its code the variable OMPI_COMM_WORLD_RANK, part of MPI's" in d.message
    assert d.file == __file__
    assert Path(__file__).read_text().splitlines()[d.line - 1].strip() == (
        'os.environ.update({"OMPI_COMM_WORLD_RANK": "0"})')


def test_a_launcher_started_by_os_system_in_a_distributed_body():
    [d] = _found(_wrap(ddp_starts_torchrun), "MP509")
    assert d.message.startswith("the body of step 'ddp_starts_torchrun' starts 'torchrun' "
                                "('torchrun --nproc_per_node 4 train.py'), but Azure ML already "
                                "starts the step as 4 process(es)")


@pytest.mark.parametrize("comp, uses", [
    (gpu_fit_with_torch, True),
    (gpu_fit_through_local_module, True),
    (gpu_fit_unknown_library, None),
])
def test_accelerator_use_is_read_through_local_modules_and_unknown_is_not_no(comp, uses):
    assert uses_accelerator(body_facts(comp.spec)) is uses
    assert _found(_wrap(comp), "MP519") == []


def test_body_facts_of_a_script_component_are_unknown():
    import dataclasses
    spec = dataclasses.replace(gpu_fit_with_torch.spec, function=None, command="python x.py")
    assert body_facts(spec) is None


@pytest.mark.parametrize("function, why", [
    ("__main__:fit", "it is defined in __main__ (a script run directly, or a notebook)"),
    ("pipelines.x:make.<locals>.fit", "it is defined inside the function 'make'"),
    ("pipelines.x:fit", None),
    (None, None),
])
def test_why_a_component_cannot_be_imported(function, why):
    assert why_not_importable(function) == why


def test_components_of_a_script_run_directly_are_refused_at_check_time(tmp_path):
    script = tmp_path / "notebook_like.py"
    script.write_text(textwrap.dedent("""
        from mlpipe import Input, Output, component, pipeline
        from mlpipe.checks import check_pipeline

        @component
        def fit(data: Input["uri_folder"], model: Output["mlflow_model"]):
            pass

        @pipeline
        def p(data):
            return fit(data=data).model

        for d in check_pipeline(p.spec)[1]:
            print(d.render())
    """))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(
        "error[MP113] component-not-importable: component 'fit' (step 'fit') cannot be imported "
        "by a step process: it is defined in __main__ (a script run directly, or a notebook)")
    assert "help: move 'fit' to a module of your project (components/fit.py)" in done.stdout


def _check(*args):
    old = os.getcwd()
    os.chdir(ROOT / "tests")
    try:
        return CliRunner().invoke(main, ["check", *args], catch_exceptions=False)
    finally:
        os.chdir(old)


@pytest.mark.parametrize("fixture, fail_on, code", [
    ("mp801.py:bad", "error", 0), ("mp801.py:bad", "warning", 1), ("mp801.py:good", "info", 0),
    ("mp519.py:bad", "warning", 0), ("mp519.py:bad", "info", 1), ("mp512.py:bad", "error", 1),
])
def test_fail_on_gates_on_the_chosen_severity(fixture, fail_on, code):
    result = _check(f"fixtures/checks/{fixture}", "--fail-on", fail_on)
    assert result.exit_code == code, result.output


@pytest.mark.parametrize("fixture, line", [
    ("mp501.py:bad", "error[MP501] pytorch-one-process-per-node"),
    ("mp512.py:bad", "error[MP512] instances-without-distribution"),
    ("mp502.py:bad", "error[MP502] processes-gpus-mismatch"),
])
def test_idle_gpus_and_idle_nodes_are_errors(fixture, line):
    result = _check(f"fixtures/checks/{fixture}")
    assert result.exit_code == 1 and line in result.output
