"""`MPNetBackbone` and its layers: buckets, masking, dtype policies, serialization."""

import keras
import numpy as np
import pytest

from sbert_keras.model.mpnet_backbone import MPNetBackbone
from sbert_keras.model.mpnet_layers import relative_position_buckets


def tiny_backbone(**kwargs):
    keras.utils.set_random_seed(0)
    options = dict(vocabulary_size=20, num_layers=2, num_heads=2, hidden_dim=8, intermediate_dim=16)
    return MPNetBackbone(**options, max_sequence_length=24, dropout=0.0, **kwargs)


def inputs(mask):
    mask = np.asarray(mask, "int32")
    ids = np.where(mask, np.arange(mask.size).reshape(mask.shape) % 17 + 3, 1).astype("int32")
    return {"token_ids": ids, "padding_mask": mask}


def test_buckets_are_t5s_bidirectional_buckets():
    table = relative_position_buckets(300)
    bucket = {r: int(table[r + 299]) for r in (0, -1, 1, -7, -8, -15, -16, 16, -63, -64, -128, -200, 200, 299)}
    # memory before context (negative) gets buckets 0..15, after it 16..31; exact below 8, log-spaced to 128.
    assert bucket == {
        0: 0, -1: 1, 1: 17, -7: 7, -8: 8, -15: 9, -16: 10, 16: 26,
        -63: 13, -64: 14, -128: 15, -200: 15, 200: 31, 299: 31,
    }  # fmt: skip


def test_padding_does_not_change_the_tokens_and_the_bias_changes_the_output():
    backbone = tiny_backbone()
    short = backbone(inputs([[1, 1, 1, 1]]))
    padded = backbone(inputs([[1, 1, 1, 1, 0, 0, 0]]))
    np.testing.assert_allclose(padded[:, :4], short, atol=1e-6)
    backbone.relative_position_bias.embeddings.assign(np.random.default_rng(0).normal(size=(32, 2)))
    assert np.abs(backbone(inputs([[1, 1, 1, 1]])) - short).max() > 1e-3


def test_a_mixed_policy_computes_the_bias_and_softmax_in_float32():
    backbone = tiny_backbone(dtype="mixed_bfloat16")
    out = backbone(inputs([[1, 1, 1, 0], [1, 1, 1, 1]]))
    assert np.isfinite(np.asarray(out, "float32")).all()
    assert backbone.relative_position_bias.compute_output_spec(keras.KerasTensor((1, 4))).dtype == "float32"


def test_config_and_keras_file_round_trip(tmp_path):
    backbone = tiny_backbone()
    clone = MPNetBackbone.from_config(backbone.get_config())
    assert clone.get_config() == backbone.get_config()
    data = inputs([[1, 1, 1, 0]])
    backbone.save(tmp_path / "mpnet.keras")
    loaded = keras.saving.load_model(tmp_path / "mpnet.keras")
    assert type(loaded) is MPNetBackbone
    np.testing.assert_allclose(loaded(data), backbone(data), atol=1e-6)


def test_absurd_sizes_are_refused_before_building():
    with pytest.raises(ValueError, match=r"hidden_dim=8 is not a multiple of num_heads=3"):
        MPNetBackbone(vocabulary_size=20, num_layers=2, num_heads=3, hidden_dim=8, intermediate_dim=16)
