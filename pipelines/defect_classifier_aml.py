"""The defect classifier as a team that already writes its pipelines with azure-ai-ml has it:
``command()`` steps in a ``@dsl.pipeline``, the DDP trainer given a ``PyTorchDistribution``,
and the candidate named in tags that azure-ai-ml and Azure ML carry and ignore. mlpipe reads
it as azure-ai-ml would submit it:
``mlpipe check pipelines/defect_classifier_aml.py:defect_classifier_aml``."""
from pathlib import Path

from azure.ai.ml import Input, Output, PyTorchDistribution, command, dsl

SRC = Path(__file__).resolve().parent / "aml_src"  # the steps' scripts

prepare = command(
    name="prepare", code=SRC, environment="azureml:defect-cpu:4",
    command="python prepare.py --raw ${{inputs.raw}} --split ${{inputs.split}} "
            "--examples ${{outputs.examples}} --labels ${{outputs.labels}}",
    inputs={"raw": Input(type="uri_folder"), "split": Input(type="uri_file")},
    outputs={"examples": Output(type="uri_folder"), "labels": Output(type="uri_file")},
)
train_cnn = command(
    name="train_cnn", code=SRC, environment="azureml:defect-gpu:7",
    command="python train.py --examples ${{inputs.examples}} --labels ${{inputs.labels}} "
            "--model ${{outputs.model}} --epochs ${{inputs.epochs}}",
    inputs={"examples": Input(type="uri_folder"), "labels": Input(type="uri_file"),
            "epochs": 15},
    outputs={"model": Output(type="uri_folder")},
    compute="gpu-cluster", instance_count=1,
    distribution=PyTorchDistribution(process_count_per_instance=2),
    tags={"mlpipe.writers.model": "rank0"},  # rank 0 alone writes the model
)
evaluate_cnn = command(
    name="evaluate_cnn", code=SRC, environment="azureml:defect-gpu:7",
    command="python evaluate.py --model ${{inputs.model}} --examples ${{inputs.examples}} "
            "--labels ${{inputs.labels}} --report ${{outputs.report}}",
    inputs={"model": Input(type="uri_folder"), "examples": Input(type="uri_folder"),
            "labels": Input(type="uri_file")},
    outputs={"report": Output(type="uri_file")},
)


@dsl.pipeline(default_compute="cpu-cluster",
              tags={"mlpipe.candidate.model": "model", "mlpipe.candidate.evaluation": "report"})
def defect_classifier_aml(raw: Input(type="uri_folder"), split: Input(type="uri_file"),
                          epochs: int = 15):
    prepared = prepare(raw=raw, split=split)
    trained = train_cnn(examples=prepared.outputs.examples, labels=prepared.outputs.labels,
                        epochs=epochs)
    scored = evaluate_cnn(model=trained.outputs.model, examples=prepared.outputs.examples,
                          labels=prepared.outputs.labels)
    return {"model": trained.outputs.model, "report": scored.outputs.report}
