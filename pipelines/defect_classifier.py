"""The visual-defect classifier: prepare the images, train, evaluate, register a candidate."""
from components.defect import evaluate, prepare, train
from mlpipe import Candidate, pipeline


@pipeline(name="defect-classifier")
def defect_classifier(raw, split, epochs=10):
    p = prepare(raw=raw, split=split)
    t = train(examples=p.examples, labels=p.labels, epochs=epochs)
    e = evaluate(model=t.model, examples=p.examples, labels=p.labels)
    return Candidate(model=t.model, evaluation=e.report)
