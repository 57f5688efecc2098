"""Accuracy of the saved model on the test folder only."""
import argparse
import json
import os

import tensorflow as tf

parser = argparse.ArgumentParser()
for name in ("--model", "--rows", "--report"):
    parser.add_argument(name)
args = parser.parse_args()
net = tf.keras.models.load_model(os.path.join(args.model, "saved"))
data = tf.data.experimental.make_csv_dataset(os.path.join(args.rows, "*.csv"), batch_size=8,
                                             label_name="y", num_epochs=1, shuffle=False)
loss = net.evaluate(data.map(lambda x, y: (tf.stack([x["x"]], axis=1), y)), verbose=0)
with open(args.report, "w") as fh:
    json.dump({"population": {"split": "test"}, "metrics": {"loss": {"value": loss}}}, fh)
