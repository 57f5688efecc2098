"""MP632 only where it is a fact: the conda file settles what an environment holds only over
an image known to carry no framework (Azure ML's base images, OS, Python, conda and CUDA
images); over any other image (a curated or vendor training image) the framework may come
from the image, and nothing is reported (issue 39)."""
from __future__ import annotations

import pytest

JOB = """\
$schema: https://azuremlschemas.azureedge.net/latest/commandJob.schema.json
type: command
code: src
command: python train.py
environment:
  image: {image}
  conda_file: conda.yml
compute: azureml:gpu-cluster
distribution:
  type: pytorch
  process_count_per_instance: 2
resources:
  instance_count: 1
"""
CONDA = "name: train\ndependencies:\n  - python=3.10\n  - pip\n  - pip:\n    - mlflow\n"


@pytest.mark.parametrize(("image", "reported"), [
    ("mcr.microsoft.com/azureml/openmpi4.1.0-cuda11.8-cudnn8-ubuntu22.04:latest", True),
    ("python:3.11-slim", True),
    ("nvidia/cuda:12.1.0-runtime-ubuntu22.04", True),
    ("continuumio/miniconda3", True),
    # the framework comes from the image
    ("mcr.microsoft.com/azureml/curated/acft-hf-nlp-gpu:62", False),
    ("nvcr.io/nvidia/pytorch:23.10-py3", False),
    ("myregistry.azurecr.io/team/trainer:7", False),
])
def test_mp632_judges_a_conda_file_only_over_an_image_known_to_carry_no_framework(
        tmp_path, image, reported):
    from mlpipe.checks import check_pipeline
    from mlpipe.loader import load_spec

    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text(
        "import torch.distributed as dist\n\ndist.init_process_group('gloo')\n")
    (tmp_path / "conda.yml").write_text(CONDA)
    (tmp_path / "job.yml").write_text(JOB.format(image=image))
    spec, _ = load_spec(str(tmp_path / "job.yml"))
    _, found = check_pipeline(spec)
    hits = [d for d in found if d.code == "MP632"]
    assert bool(hits) is reported, hits
    if reported:
        assert hits[0].message.startswith(
            "step 'job' needs torch (its PyTorch distribution) but the conda file of "
            "environment")
