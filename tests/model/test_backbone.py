import keras
import numpy as np
import pytest

from harness import run_model_saving_test
from harness import run_precision_test
from harness import run_serialization_test
from sbert_keras.model.backbone import BertLayoutBackbone

ARGS = dict(
    vocabulary_size=10,
    num_layers=2,
    num_heads=2,
    hidden_dim=8,
    intermediate_dim=16,
    max_sequence_length=12,
    dropout=0.0,
)
INPUTS = {
    "token_ids": np.array([[2, 5, 6, 3, 0], [2, 7, 3, 0, 0]], "int32"),
    "padding_mask": np.array([[1, 1, 1, 1, 0], [1, 1, 1, 0, 0]], "int32"),
}


def test_output_shape_and_exact_gelu():
    backbone = BertLayoutBackbone(**ARGS)
    assert backbone(INPUTS).shape == (2, 5, 8)
    assert backbone.transformer_layers[0].activation is keras.activations.gelu


def test_serialization_round_trip():
    clone = run_serialization_test(BertLayoutBackbone(**ARGS, activation="relu", layer_norm_epsilon=1e-5))
    assert clone.activation == "relu" and clone.layer_norm_epsilon == 1e-5


def test_keras_round_trip(tmp_path):
    run_model_saving_test(BertLayoutBackbone(**ARGS), INPUTS, tmp_path, atol=1e-6)


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_mixed_precision_computes_low_and_stays_finite(policy):
    # Token embeddings come out in the policy's compute dtype (pooling casts them up).
    run_precision_test(lambda: BertLayoutBackbone(**ARGS), INPUTS, policies=(policy,), output_dtype=None)
