"""Tests of `sbert_keras.runtime.routes.xnnpack_runner` that need no engine (the routes': test_xnnpack.py)."""

import numpy as np

from sbert_keras.runtime.routes import xnnpack_runner
from sbert_keras.utils.backends import tensorflow as tf


def test_fewest_tokens_counts_words_and_the_start_and_end_tokens_up_to_the_sequence_length():
    assert xnnpack_runner.fewest_tokens(["a man plays", "a dog"], 64) == 2 * (3 + 2)
    assert xnnpack_runner.fewest_tokens(["", "word " * 100], 64) == 2 * 64
    assert xnnpack_runner.fewest_tokens(["a,b,c"], 64) == 3  # one word: the bound is low, never high


def test_checked_forward_returns_float32_vectors_and_whether_the_weights_changed():
    class Weights:
        def changed(self):
            return tf.constant(True)

    fused = tf.function(lambda ids, mask: tf.cast(ids * mask, tf.bfloat16)[:, :2])
    ids = np.array([[3, 4, 5]], "int32")
    pooled, changed = xnnpack_runner.checked_forward(fused, Weights())(tf.constant(ids), tf.constant(ids))
    assert pooled.dtype == tf.float32 and pooled.numpy().tolist() == [[9.0, 16.0]] and bool(changed)
    _, unchecked = xnnpack_runner.checked_forward(fused)(tf.constant(ids), tf.constant(ids))
    assert not bool(unchecked)  # float32's weights: checked by the query's first call
