"""No NaN in loss or gradients under mixed precision, for degenerate inputs."""

import pytest
import tensorflow as tf

import sbert_keras as sk
from conftest import tiny_encoder
from harness import MIXED_POLICIES
from harness import run_precision_test

MODELS = {
    "regression": sk.RegressionSiamese,
    "triplet": sk.TripletSiamese,
    "classification": sk.ClassificationSiamese,
    "contrastive": sk.ContrastiveSiamese,
}

CASES = {
    "identical": (["a man is playing guitar", "a cat"], ["a man is playing guitar", "a cat"]),
    "empty": (["", ""], ["", " "]),
}


def preprocess(model, columns):
    features, _ = model.preprocessor(tuple(tf.constant(c) for c in columns), y=tf.zeros(len(columns[0])))
    return features


def inputs_for(case):
    """`model -> features` for a case; "all_padding" masks every token."""

    def make(model):
        texts = CASES.get(case, CASES["identical"])
        columns = list(texts) + ([texts[0]] if len(model.active_roles) == 3 else [])
        x = preprocess(model, columns)
        if case == "all_padding":
            x = {k: (tf.zeros_like(v) if k.endswith("padding_mask") else v) for k, v in x.items()}
        return x

    return make


@pytest.mark.parametrize("policy", MIXED_POLICIES)
@pytest.mark.parametrize("case", ["identical", "empty", "all_padding"])
@pytest.mark.parametrize("kind", ["regression", "triplet", "classification", "contrastive"])
def test_no_nan_in_loss_or_gradients(policy, kind, case):
    def build():
        encoder = tiny_encoder(normalize=kind != "triplet")
        assert encoder.backbone.compute_dtype in ("float16", "bfloat16")
        return MODELS[kind](encoder)

    y = tf.constant([0, 1]) if kind == "classification" else tf.constant([1.0, 1.0])
    # The harness checks: the output and the loss are float32 and finite, and
    # every weight gets a finite gradient (every weight is trained).
    losses = run_precision_test(build, inputs_for(case), y=y, loss="default", policies=(policy,))
    assert set(losses) == {policy}
