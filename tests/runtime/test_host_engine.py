"""`runtime.host_engine`'s padded lengths: the next bucket, never past the preprocessor's `sequence_length`."""

import pytest

from sbert_keras.runtime.host_engine import bucket_width
from sbert_keras.utils.defaults import BUCKETS


@pytest.mark.parametrize("longest", [1, BUCKETS[0], BUCKETS[0] + 1, BUCKETS[-1]])
def test_a_batch_pads_to_the_next_bucket(longest):
    width = bucket_width(longest)
    assert width in BUCKETS and width >= longest
    assert all(bucket < longest for bucket in BUCKETS if bucket < width)


def test_past_the_last_bucket_a_batch_keeps_its_length():
    assert bucket_width(BUCKETS[-1] + 3) == BUCKETS[-1] + 3


def test_the_bucket_stops_at_the_sequence_length():
    limit = BUCKETS[0] + 1  # a model whose position embeddings end between two buckets
    assert bucket_width(BUCKETS[0] + 1, limit=limit) == limit
    assert bucket_width(2, limit=limit) == BUCKETS[0]
    assert bucket_width(limit, limit=limit) == limit
