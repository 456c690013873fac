"""tf.data pipelines for the siamese objectives: length buckets or batches without duplicate texts.

`model.fit(strings)` pads every text to `sequence_length` (KerasHub's
preprocessor packs to a fixed length). For training, this module instead
tokenises inside tf.data and pads each batch only to a length from the
small set `defaults.BUCKETS`, so the train step sees few distinct shapes
(Keras' `reduce_retracing` keeps it at one or two traces). Three batchings
(`defaults.BATCHINGS`):

- `"bucket"`: groups examples of similar length
  (`tf.data.Dataset.bucket_by_sequence_length`), the fastest per epoch.
- `"no_duplicates"`: random batches in which no text appears twice (in any
  role), for in-batch negatives, where a repeated premise or hypothesis is
  its own false negative. sentence-transformers' `NoDuplicatesBatchSampler`
  is a PyTorch sampler, and tf.data has no sampler of this kind, so the
  greedy plan (`no_duplicate_batches`) is written here.
- `"shuffle"`: random batches, duplicates allowed (the plain baseline).
"""

import numpy as np
import tensorflow as tf

from sbert_keras.model.preprocessor import check_texts
from sbert_keras.utils.defaults import BATCHING
from sbert_keras.utils.defaults import BATCHINGS
from sbert_keras.utils.defaults import BUCKETS
from sbert_keras.utils.defaults import DEFAULT_BATCHING
from sbert_keras.utils.defaults import PAPER_BATCH_SIZE


def bucket_boundaries(sequence_length):
    """Upper bounds (exclusive) of the length buckets up to `sequence_length`."""
    lengths = [b for b in BUCKETS if b < sequence_length] + [sequence_length]
    return [b + 1 for b in lengths]


def text_codes(columns):
    """`(n, len(columns))` int64: one code per distinct text, shared across columns."""
    codes = {}
    return np.array([[codes.setdefault(t, len(codes)) for t in row] for row in zip(*columns)], "int64")


def no_duplicate_batches(codes, batch_size, order):
    """Batches of row indices in which no text code appears in two rows.

    Greedy, as sentence-transformers' `NoDuplicatesBatchSampler`: walk the
    rows not yet used in `order`, take each whose texts are not yet in the
    batch, skip (defer) the others, and close the batch when full; a pass
    that cannot fill it closes it short. Every row lands in exactly one
    batch. A row may repeat a text within itself (e.g. anchor == positive).

    Args:
        codes: int array `(n, k)`, e.g. from `text_codes`.
        batch_size: int. Rows per full batch.
        order: int array `(n,)`, a permutation of the rows.

    Returns:
        list of int64 arrays.

    Example:
    ```python
    codes = text_codes([["a", "a", "b"], ["x", "y", "z"]])
    no_duplicate_batches(codes, 2, np.arange(3))  # [array([0, 2]), array([1])]
    ```
    """
    rows = [frozenset(r) for r in codes.tolist()]
    remaining = dict.fromkeys(np.asarray(order).tolist())
    batches = []
    while remaining:
        batch, used = [], set()
        for i in remaining:
            if used.isdisjoint(rows[i]):
                batch.append(i)
                used.update(rows[i])
                if len(batch) == batch_size:
                    break
        for i in batch:
            del remaining[i]
        batches.append(np.array(batch, "int64"))
    return batches


def check_batching(batching, objective=None):
    """`batching` (None: `objective`'s default) if it is one of `defaults.BATCHINGS`, else a `ValueError`."""
    if batching is None:
        batching = BATCHING.get(objective, DEFAULT_BATCHING)
    if batching not in BATCHINGS:
        raise ValueError(f"`batching` must be one of {BATCHINGS}. Received {batching!r}.")
    return batching


def siamese_dataset(
    columns,
    labels,
    preprocessor,
    roles,
    batch_size=PAPER_BATCH_SIZE,
    shuffle=True,
    seed=None,
    batching=None,
    label_dtype="float32",
    objective=None,
):
    """A `tf.data.Dataset` of `(features, labels)` for a siamese model.

    Args:
        columns: list of lists of str, one per role (e.g. `[a, b]`).
        labels: array-like or None (zeros are used: triplet/contrastive).
        preprocessor: the encoder's `SentenceEncoderPreprocessor`.
        roles: tuple of str, the siamese model's `active_roles`.
        batch_size: int. Examples per batch (16 in the SBERT paper).
        shuffle: bool. Reshuffle every epoch.
        seed: int or None. Shuffle seed: the same seed gives the same
            batches, epoch by epoch.
        batching: str or None. `"bucket"` (similar lengths together),
            `"no_duplicates"` (random batches with no text twice) or
            `"shuffle"` (random batches); `None`: the objective's default
            (`defaults.BATCHING`: no duplicates for in-batch negatives,
            `"contrastive"`; else `"bucket"`).
        label_dtype: str. `"float32"` (scores) or `"int32"` (classes).
        objective: str or None. The objective trained (`defaults.OBJECTIVES`),
            which picks the default `batching`.

    Returns:
        A dataset whose features are `{f"{role}_{name}": int32 tensor}`, the
        layout every `SiameseModel` takes; each batch is padded to a length
        of `defaults.BUCKETS` (or `sequence_length`).

    Example:
    ```python
    ds = siamese_dataset([anchors, positives], None, encoder.preprocessor,
                         ("anchor", "positive"), batching="no_duplicates", seed=0)
    ```
    """
    batching = check_batching(batching, objective)
    if len(columns) != len(roles):
        raise ValueError(f"Expected {len(roles)} text columns {roles}; received {len(columns)}.")
    columns = [check_texts(c, what=f"{role} texts") for c, role in zip(columns, roles, strict=True)]
    n = len(columns[0])
    for role, column in zip(roles, columns, strict=True):
        if len(column) != n:
            raise ValueError(f"Column {role!r} has {len(column)} texts; expected {n}.")
    labels = np.zeros(n, label_dtype) if labels is None else np.asarray(labels, label_dtype)
    if len(labels) != n:
        raise ValueError(f"Got {len(labels)} labels for {n} examples.")
    if batching == "bucket":
        ds = _bucketed(columns, labels, preprocessor, roles, batch_size, shuffle, seed)
    else:
        ds = _planned(columns, labels, preprocessor, batch_size, shuffle, seed, batching == "no_duplicates")

    def to_features(ids, y):
        features = {}
        for role, token_ids in zip(roles, ids, strict=True):
            for name, value in preprocessor.format_features(token_ids).items():
                features[f"{role}_{name}"] = value
        return features, y

    return ds.map(to_features, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)


def _bucketed(columns, labels, preprocessor, roles, batch_size, shuffle, seed):
    """Length-bucketed batches of `(ids per role, labels)`."""
    n = len(labels)
    pad = preprocessor.tokenizer.pad_token_id
    ds = tf.data.Dataset.from_tensor_slices((tuple(columns), labels))
    if shuffle:
        ds = ds.shuffle(n, seed=seed, reshuffle_each_iteration=True)

    def tokenize(texts, y):
        ragged = [preprocessor.ragged_token_ids(t)[0] for t in texts]
        return tuple(r.to_tensor(pad) for r in ragged), tuple(r.row_lengths() for r in ragged), y

    def trim(ids, lengths, y):
        return tuple(t[:n] for t, n in zip(ids, lengths, strict=True)), y

    # Tokenise in large batches (fast), then split back into examples.
    ds = ds.batch(1024).map(tokenize, num_parallel_calls=tf.data.AUTOTUNE)
    ds = ds.unbatch().map(trim, num_parallel_calls=tf.data.AUTOTUNE)
    boundaries = bucket_boundaries(preprocessor.sequence_length)
    return ds.bucket_by_sequence_length(
        element_length_func=lambda ids, y: tf.reduce_max([tf.shape(t)[0] for t in ids]),
        bucket_boundaries=boundaries,
        bucket_batch_sizes=[batch_size] * (len(boundaries) + 1),
        padding_values=(tuple(tf.constant(pad, tf.int32) for _ in columns), None),
        pad_to_bucket_boundary=True,
    )


def _planned(columns, labels, preprocessor, batch_size, shuffle, seed, no_duplicates):
    """Batches from an index plan drawn per epoch (seeded), padded to a bucket length.

    The plan of epoch `e` comes from `np.random.default_rng([seed, e])`, so
    a seed gives the same batches each run; `dataset.skip(k)` (a resumed
    backup) skips the first epoch's first `k` batches.
    """
    n = len(labels)
    codes = text_codes(columns) if no_duplicates else None
    rng = np.random.default_rng(seed) if seed is None else None
    epochs = iter(range(2**62))

    def plan():
        order = np.arange(n)
        if shuffle:
            order = (rng or np.random.default_rng([seed, next(epochs)])).permutation(n)
        if no_duplicates:
            yield from no_duplicate_batches(codes, batch_size, order)
        else:
            yield from (order[i : i + batch_size] for i in range(0, n, batch_size))

    pad = preprocessor.tokenizer.pad_token_id
    widths = tf.constant([b - 1 for b in bucket_boundaries(preprocessor.sequence_length)], tf.int64)
    texts = [tf.constant(c, tf.string) for c in columns]
    targets = tf.constant(labels)

    def gather(index):
        ragged = [preprocessor.ragged_token_ids(tf.gather(t, index))[0] for t in texts]
        longest = tf.reduce_max([tf.reduce_max(r.row_lengths()) for r in ragged])
        width = tf.gather(widths, tf.searchsorted(widths, tf.reshape(longest, [1]))[0])
        shape = tf.stack([tf.size(index, tf.int64), width])
        ids = tuple(tf.cast(r.to_tensor(pad, shape=shape), tf.int32) for r in ragged)
        return ids, tf.gather(targets, index)

    ds = tf.data.Dataset.from_generator(plan, output_signature=tf.TensorSpec([None], tf.int64))
    return ds.map(gather, num_parallel_calls=tf.data.AUTOTUNE)
