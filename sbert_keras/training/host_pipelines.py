"""The training batches on JAX and PyTorch: `pipelines.siamese_dataset`'s batches as a `keras.utils.PyDataset`.

tf.data exists only with TensorFlow, and its in-graph tokenisers only on
TensorFlow's backend; Keras' JAX and PyTorch trainers read a
`keras.utils.PyDataset` as they read any dataset. `HostBatches` is the
twin of the tf.data pipeline: the texts are tokenised once on the host
(`SentenceEncoderPreprocessor.host_token_ids`, the same ids as the graph
tokenisers), each batch is gathered from the plan of its pass
(`batch_plans`: the same orders, buckets and no-duplicate plans as
tf.data's) and padded with NumPy (`host_tokenizer.pad_rows`) to the same
bucket length. The features are the same dict, `{f"{role}_token_ids",
f"{role}_padding_mask"}` (int32), with the labels; the number of batches
is known before the first (`len`).

`ArrayBatches` is the host twin of `fit_inputs.array_batches`' tf.data
batches: arrays in a new order each epoch, each batch mapped by the
model's preprocessor (tokenised on the host) when one is given.

Example:
```python
batches = HostBatches([a, b], scores, encoder.preprocessor, ("sentence_a", "sentence_b"), "bucket", 16,
                      seed=0, passes=range(4))
model.fit(batches, epochs=4, steps_per_epoch=len(batches) // 4, shuffle=False)
```
"""

import copy

import keras
import numpy as np
from keras import tree

from sbert_keras.model.host_tokenizer import pad_rows
from sbert_keras.training.batch_plans import PassPlans
from sbert_keras.training.batch_plans import batch_width
from sbert_keras.training.batch_plans import bucket_batch_count
from sbert_keras.training.batch_plans import bucket_batches
from sbert_keras.training.batch_plans import pass_order
from sbert_keras.training.batch_plans import text_codes
from sbert_keras.utils.defaults import KERAS_BATCH_SIZE


def host_features(preprocessor, roles, rows, index, width=None):
    """`{f"{role}_{name}": np.int32 array}` of the rows `index` of each role, padded to `width`.

    Args:
        preprocessor: the encoder's `SentenceEncoderPreprocessor`.
        roles: tuple of str.
        rows: list (one per role) of lists of 1-D int arrays (`host_token_ids`'s rows).
        index: int array of row indices.
        width: int or None. The padded length; None: the bucket length of the longest row.
    """
    if width is None:
        longest = max((len(r[i]) for r in rows for i in index), default=2)
        width = batch_width(longest, preprocessor.sequence_length)
    pad = preprocessor.tokenizer.pad_token_id
    features = {}
    for role, role_rows in zip(roles, rows, strict=True):
        ids = pad_rows([role_rows[i] for i in index], pad, width)
        features[f"{role}_token_ids"] = ids
        features[f"{role}_padding_mask"] = (ids != pad).astype(np.int32)
        if preprocessor.include_segment_ids:
            features[f"{role}_segment_ids"] = np.zeros_like(ids)
    return features


class HostBatches(keras.utils.PyDataset):
    """The batches of `pipelines.siamese_dataset`, tokenised on the host (its arguments, already checked).

    Without `passes` each iteration (Keras epoch) is the next pass; with
    `passes` one iteration yields those passes back to back. `skip(k)`
    leaves out the first `k` batches (a resumed run). A `"no_duplicates"`
    pass without `epochs` is planned as one pass ahead: later passes are
    split or cut to its number of batches (`batch_plans.split_to_count`).

    Args:
        columns: list of lists of str, one per role.
        labels: NumPy array, one row per example.
        preprocessor: the encoder's `SentenceEncoderPreprocessor`.
        roles: tuple of str.
        batching: str. One of `defaults.BATCHINGS`.
        batch_size: int.
        shuffle: bool. A new order each pass.
        seed: int or None.
        epochs: int or None. The passes planned ahead (`PassPlans`).
        passes: `range` or None.
    """

    def __init__(self, columns, labels, preprocessor, roles, batching, batch_size, shuffle, seed, epochs, passes):
        super().__init__()
        self.preprocessor, self.roles, self.labels, self.batching = preprocessor, tuple(roles), labels, batching
        self.batch_size, self.shuffle, self.passes = batch_size, shuffle, passes
        self.rows = [preprocessor.host_token_ids(column)[0] for column in columns]
        self.lengths = np.max([[len(r) for r in rows] for rows in self.rows], axis=0)
        n, length = len(labels), preprocessor.sequence_length
        self.seed = int(np.random.randint(2**31)) if seed is None else seed
        if batching == "bucket":
            self.plans, self.count = None, bucket_batch_count(self.lengths, length, batch_size)
        else:
            codes = text_codes(columns) if batching == "no_duplicates" else None
            self.plans = PassPlans(n, batch_size, shuffle, seed, codes, epochs or 1)
            self.count = self.plans.num_batches
        self.epoch, self.skipped, self._plan = 0, 0, (None, None)

    def plan(self, index):
        """The batches (row indices) of pass `index`."""
        if self._plan[0] != index:
            if self.plans is not None:
                batches = self.plans.plan(index)
            else:
                order = pass_order(len(self.labels), self.shuffle, self.seed, index)
                batches = bucket_batches(self.lengths, order, self.preprocessor.sequence_length, self.batch_size)
            self._plan = (index, batches)
        return self._plan[1]

    def batch_indices(self, i):
        """The row indices of batch `i` (after the skipped ones)."""
        step = i + self.skipped
        if self.passes is None:
            return self.plan(self.epoch)[step]
        return self.plan(self.passes[step // self.count])[step % self.count]

    def __len__(self):
        return self.count * (1 if self.passes is None else len(self.passes)) - self.skipped

    def __getitem__(self, i):
        if not 0 <= i < len(self):
            raise IndexError(f"Batch {i} of {len(self)}.")
        index = self.batch_indices(i)
        return host_features(self.preprocessor, self.roles, self.rows, index), self.labels[index]

    def on_epoch_end(self):
        if self.passes is None:
            self.epoch += 1
            self.skipped = 0

    def skip(self, count):
        """These batches without the first `count` (as `tf.data.Dataset.skip`)."""
        skipped = copy.copy(self)
        skipped.skipped = self.skipped + int(count)
        return skipped


def batch_count(dataset):
    """The batches of a `tf.data.Dataset` (its cardinality) or of a `keras.utils.PyDataset`."""
    if isinstance(dataset, keras.utils.PyDataset):
        return len(dataset)
    return int(dataset.cardinality())


class ArrayBatches(keras.utils.PyDataset):
    """Arrays (texts, labels, weights) in batches, in a new order each epoch; `preprocessor` maps each batch.

    Args:
        data: the packed `(x, y, sample_weight)` structure of NumPy arrays.
        batch_size: int or None (Keras' 32).
        shuffle: bool. A new order each epoch.
        preprocessor: callable `(x, y, sample_weight) -> batch`, or None.
    """

    def __init__(self, data, batch_size=None, shuffle=True, preprocessor=None):
        super().__init__()
        self.data, self.preprocessor = data, preprocessor
        self.batch_size = batch_size or KERAS_BATCH_SIZE
        self.n = len(tree.flatten(data)[0])
        self.shuffle = shuffle
        self.order = np.random.permutation(self.n) if shuffle else np.arange(self.n)

    def __len__(self):
        return -(-self.n // self.batch_size)

    def __getitem__(self, i):
        index = self.order[i * self.batch_size : (i + 1) * self.batch_size]
        batch = tree.map_structure(lambda a: a[index], self.data)
        if self.preprocessor is None:
            return batch
        return self.preprocessor(*keras.utils.unpack_x_y_sample_weight(batch))

    def on_epoch_end(self):
        if self.shuffle:
            self.order = np.random.permutation(self.n)
