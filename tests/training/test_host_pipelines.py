"""The host batches (`host_pipelines.HostBatches`, JAX and PyTorch) equal tf.data's batch for batch."""

import numpy as np
import pytest

from conftest import tiny_encoder
from sbert_keras.training.batch_plans import bucket_batches
from sbert_keras.training.batch_plans import check_columns
from sbert_keras.training.host_pipelines import ArrayBatches
from sbert_keras.training.host_pipelines import HostBatches
from sbert_keras.training.pipelines import siamese_dataset

WORDS = "a man woman is playing guitar piano dog cat runs the sleeps on sofa park in ball red".split()
ROLES = ("sentence_a", "sentence_b")
ENCODERS = {}  # one per sequence length: its graph tokeniser traces once


def texts(seed, n=45):
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=rng.integers(1, 15))) for _ in range(n)]


def both(batching, shuffle=True, passes=range(2), seed=3, sequence_length=20):
    """`(tf.data batches, host batches)` of the same texts, labels = row indices."""
    encoder = ENCODERS.setdefault(sequence_length, tiny_encoder(sequence_length=sequence_length))
    a, b = texts(0), texts(1)
    b[5] = a[7]  # a repeated text: no-duplicate plans defer it
    labels = np.arange(len(a), dtype="float32")
    args = ([a, b], labels, encoder.preprocessor, ROLES)
    kwargs = {"batch_size": 4, "shuffle": shuffle, "seed": seed, "batching": batching, "epochs": 2, "passes": passes}
    tf_batches = list(siamese_dataset(*args, **kwargs).as_numpy_iterator())
    columns, labels = check_columns([a, b], labels, ROLES, "float32")
    host = HostBatches(columns, labels, encoder.preprocessor, ROLES, batching, 4, shuffle, seed, 2, passes)
    return tf_batches, host


@pytest.mark.parametrize(
    "batching,shuffle", [("bucket", True), ("bucket", False), ("no_duplicates", True), ("shuffle", True)]
)
def test_host_batches_equal_the_tf_data_batches(batching, shuffle):
    tf_batches, host = both(batching, shuffle)
    assert len(host) == len(tf_batches) > 2
    for i, (x, y) in enumerate(tf_batches):
        hx, hy = host[i]
        np.testing.assert_array_equal(hy, y)  # the same example indices, in the same order
        assert list(hx) == list(x)
        for key in x:
            assert hx[key].dtype == np.int32
            np.testing.assert_array_equal(hx[key], x[key], err_msg=f"batch {i} {key}")


def test_host_passes_follow_the_seed_and_skip_resumes_mid_pass():
    _, host = both("bucket", passes=range(2))
    _, later = both("bucket", passes=range(1, 2))
    per_pass = len(host) // 2
    first = [host[i][1] for i in range(len(host))]
    np.testing.assert_array_equal(np.concatenate(first[per_pass:]), np.concatenate([y for _, y in later]))
    assert not np.array_equal(np.concatenate(first[:per_pass]), np.concatenate(first[per_pass:]))
    skipped = host.skip(3)
    assert len(skipped) == len(host) - 3
    np.testing.assert_array_equal(skipped[0][1], first[3])


def test_bucket_batches_close_full_buckets_at_once_and_the_rest_by_length():
    batches = bucket_batches(np.array([3, 40, 4, 5, 41]), np.arange(5), 64, 2)
    assert [b.tolist() for b in batches] == [[0, 2], [1, 4], [3]]


def test_array_batches_cover_every_row_once_per_epoch_in_a_new_order():
    x = np.array([f"text {i}" for i in range(10)])
    batches = ArrayBatches((x, np.arange(10.0)), batch_size=4, shuffle=True)
    first = np.concatenate([batches[i][1] for i in range(len(batches))])
    batches.on_epoch_end()
    second = np.concatenate([batches[i][1] for i in range(len(batches))])
    assert len(batches) == 3 and sorted(first) == sorted(second) == list(range(10))
    assert not np.array_equal(first, second)
