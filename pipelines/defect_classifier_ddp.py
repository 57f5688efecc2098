"""The visual-defect classifier with the distributed CNN trainer (needs the torch extra to run;
checking and compiling it does not)."""
from components.defect import prepare
from components.defect_ddp import evaluate_cnn, train_cnn
from mlpipe import Candidate, pipeline


@pipeline(name="defect-classifier-ddp")
def defect_classifier_ddp(raw, split, epochs=40):
    p = prepare(raw=raw, split=split)
    t = train_cnn(examples=p.examples, labels=p.labels, epochs=epochs)
    e = evaluate_cnn(model=t.model, examples=p.examples, labels=p.labels)
    return Candidate(model=t.model, evaluation=e.report)
