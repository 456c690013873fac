import json
import subprocess
import sys

import numpy as np

from conftest import tiny_encoder
from sbert_keras import export_saved_model

TEXTS = ["a man is playing guitar", "the cat sleeps", "", "東京 😀", "a " * 40]

SERVE = """
import json, sys
import tensorflow as tf
import tensorflow_text  # registers the tokenizer ops the graph uses
model = tf.saved_model.load(sys.argv[1])
body = json.loads(sys.stdin.read())  # a TF Serving REST body
out = model.signatures["serving_default"](text=tf.constant(body["instances"]))
print(json.dumps({"predictions": out["embeddings"].numpy().tolist()}))
"""


def test_saved_model_serves_raw_strings_in_a_fresh_process(tmp_path):
    encoder = tiny_encoder(normalize=True, kind="roberta")
    path = str(tmp_path / "sbert" / "1")
    export_saved_model(encoder, path)
    expected = encoder.encode(TEXTS)
    result = subprocess.run(
        [sys.executable, "-c", SERVE, path],
        input=json.dumps({"instances": TEXTS}),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    got = np.array(json.loads(result.stdout.strip().splitlines()[-1])["predictions"])
    assert got.shape == expected.shape
    assert np.abs(got - expected).max() <= 1e-5
