"""tf.data pipelines for the siamese objectives: length buckets or batches without duplicate texts.

`model.fit(strings)` pads every text to `sequence_length` (KerasHub's
preprocessor packs to a fixed length). For training, this module instead
tokenises each column once (`token_id_columns`), gathers the rows of each
batch inside tf.data and pads them only to a length from the
small set `defaults.BUCKETS`, so the train step sees few distinct shapes
(Keras' `reduce_retracing` keeps it at one or two traces). Three batchings
(`defaults.BATCHINGS`), planned in NumPy by `batch_plans`:

- `"bucket"`: groups examples of similar length
  (`tf.data.Dataset.bucket_by_sequence_length`), the fastest per epoch.
- `"no_duplicates"`: random batches in which no text appears twice (in any
  role), for in-batch negatives, where a repeated premise or hypothesis is
  its own false negative (`batch_plans.no_duplicate_batches`).
- `"shuffle"`: random batches, duplicates allowed (the plain baseline).

On JAX and PyTorch `siamese_dataset` returns the host twin instead,
`host_pipelines.HostBatches` (a `keras.utils.PyDataset`): the same batches,
tokenised on the host. With `passes` (what `train_objective` uses) every
batching gives the same example indices per batch on every backend for the
same seed; without it, a shuffled `"bucket"` pass on TensorFlow comes from
tf.data's own shuffle.

Every dataset states its number of batches (`cardinality()`), so that
Keras' progress bar shows a total and the learning-rate schedule spans the
steps that run. tf.data cannot know it (buckets fill by length, plans come
from a generator), so it is counted here and set with
`tf.data.experimental.assert_cardinality`, which also fails loudly if a
pass ever yields another number: for buckets, each bucket's batches from
the token lengths (`bucket_batch_count`); for plans, from the plans drawn
ahead (`PassPlans`).
"""

import numpy as np

from sbert_keras.training.batch_plans import PassPlans
from sbert_keras.training.batch_plans import bucket_batch_count
from sbert_keras.training.batch_plans import bucket_batches  # noqa: F401 (importable from here too)
from sbert_keras.training.batch_plans import bucket_boundaries
from sbert_keras.training.batch_plans import check_batching
from sbert_keras.training.batch_plans import check_columns
from sbert_keras.training.batch_plans import no_duplicate_batches  # noqa: F401 (importable from here too)
from sbert_keras.training.batch_plans import pass_order
from sbert_keras.training.batch_plans import split_to_count  # noqa: F401 (importable from here too)
from sbert_keras.training.batch_plans import text_codes
from sbert_keras.training.host_pipelines import HostBatches
from sbert_keras.utils import backends
from sbert_keras.utils.backends import tensorflow as tf
from sbert_keras.utils.defaults import PAPER_BATCH_SIZE


def token_id_columns(columns, preprocessor, chunk=4096):
    """Each column's `[start] ids [end]` rows (cut at `sequence_length`) as one `tf.RaggedTensor`, tokenised once.

    `preprocessor.tokenize` runs `ragged_token_ids` as a `tf.function`
    traced once per preprocessor; the texts go through it `chunk` at a time.
    """
    tokenized = []
    for column in columns:
        parts = [preprocessor.tokenize(list(column[i : i + chunk]))[0] for i in range(0, len(column), chunk)]
        tokenized.append(tf.concat(parts, axis=0) if parts else preprocessor.tokenize([])[0])
    return tokenized


def row_lengths(columns, preprocessor, ids=None):
    """`(n,)` int64: each row's length in tokens (start and end included, cut at `sequence_length`), its longest role's.

    The lengths `_bucketed` sorts rows into buckets by. `ids`: the columns'
    `token_id_columns`, when already computed.
    """
    ids = token_id_columns(columns, preprocessor) if ids is None else ids
    lengths = [ragged.row_lengths().numpy().astype("int64") for ragged in ids]
    return np.max(np.stack(lengths), axis=0) if lengths else np.zeros(0, "int64")


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
    epochs=None,
    passes=None,
):
    """A `tf.data.Dataset` of `(features, labels)` for a siamese model, its number of batches known.

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
        epochs: int or None. `"no_duplicates"` only: the passes to plan
            ahead, so that each has the same number of batches (`PassPlans`);
            None: its cardinality stays unknown. The other batchings always
            have the same number of batches.
        passes: `range` or None. None: each iteration of the dataset is
            one pass, in a new order. A range (of pass indices from 0, e.g.
            `range(2, epochs)`): one iteration yields these passes back to
            back, each in the order of its index and the seed, whatever ran
            before, so that a resumed run sees the batches an uninterrupted
            one would (`fit` it with `steps_per_epoch` = one pass's batches).

    Returns:
        A dataset whose features are `{f"{role}_{name}": int32 tensor}`, the
        layout every `SiameseModel` takes; each batch is padded to a length
        of `defaults.BUCKETS` (or `sequence_length`). `ds.cardinality()` is
        the number of batches of every pass (unknown only for
        `"no_duplicates"` without `epochs`), times `len(passes)` with `passes`.

    Example:
    ```python
    ds = siamese_dataset([anchors, positives], None, encoder.preprocessor,
                         ("anchor", "positive"), batching="no_duplicates", seed=0)
    ```
    """
    batching = check_batching(batching, objective)
    columns, labels = check_columns(columns, labels, roles, label_dtype)
    if not backends.uses_tensorflow():
        return HostBatches(columns, labels, preprocessor, roles, batching, batch_size, shuffle, seed, epochs, passes)
    n = len(labels)
    if batching == "bucket":
        ds = _bucketed(columns, labels, preprocessor, batch_size, shuffle, seed, passes)
    else:
        codes = text_codes(columns) if batching == "no_duplicates" else None
        plans = PassPlans(n, batch_size, shuffle, seed, codes, epochs)
        ds = _planned(columns, labels, preprocessor, plans, passes)

    def to_features(ids, y):
        features = {}
        for role, token_ids in zip(roles, ids, strict=True):
            for name, value in preprocessor.format_features(token_ids).items():
                features[f"{role}_{name}"] = value
        return features, y

    return ds.map(to_features, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)


def _bucketed(columns, labels, preprocessor, batch_size, shuffle, seed, passes=None):
    """Length-bucketed batches of `(ids per role, labels)` (of `passes`, see `siamese_dataset`)."""
    n = len(labels)
    pad = preprocessor.tokenizer.pad_token_id
    ids = token_id_columns(columns, preprocessor)  # tokenised once, for the lengths and every pass
    targets = tf.constant(labels)

    def gather(index):
        ragged = [tf.gather(column, index) for column in ids]
        y = tf.gather(targets, index)
        return tuple(r.to_tensor(pad) for r in ragged), tuple(r.row_lengths() for r in ragged), y

    def trim(ids, lengths, y):
        return tuple(t[:n] for t, n in zip(ids, lengths, strict=True)), y

    boundaries = bucket_boundaries(preprocessor.sequence_length)

    def one_pass(order):
        # Gather in large batches (fast), then split back into examples.
        ds = order.batch(1024).map(gather, num_parallel_calls=tf.data.AUTOTUNE)
        ds = ds.unbatch().map(trim, num_parallel_calls=tf.data.AUTOTUNE)
        return ds.bucket_by_sequence_length(
            element_length_func=lambda ids, y: tf.reduce_max([tf.shape(t)[0] for t in ids]),
            bucket_boundaries=boundaries,
            bucket_batch_sizes=[batch_size] * (len(boundaries) + 1),
            padding_values=(tuple(tf.constant(pad, tf.int32) for _ in columns), None),
            pad_to_bucket_boundary=True,
        )

    count = bucket_batch_count(row_lengths(columns, preprocessor, ids), preprocessor.sequence_length, batch_size)
    if passes is None:
        order = tf.data.Dataset.range(n)
        if shuffle:
            order = order.shuffle(n, seed=seed, reshuffle_each_iteration=True)
        return one_pass(order).apply(tf.data.experimental.assert_cardinality(count))
    pass_seed = np.random.randint(2**31) if seed is None else seed
    # The orders of `batch_plans.pass_order`, as on every backend: the same seed, the same batches.
    orders = np.stack([pass_order(n, shuffle, pass_seed, index) for index in passes])
    ds = tf.data.Dataset.from_tensor_slices(orders).flat_map(lambda o: one_pass(tf.data.Dataset.from_tensor_slices(o)))
    return ds.apply(tf.data.experimental.assert_cardinality(count * len(passes)))


def _planned(columns, labels, preprocessor, plans, passes=None):
    """Batches of the row plans of a `PassPlans`, one plan per pass, padded to a bucket length.

    A seed gives the same batches each run; `dataset.skip(k)` (a resumed
    backup) skips the first pass's first `k` batches. With `passes`, one
    iteration yields those passes' plans (`PassPlans.plan`).
    """
    pad = preprocessor.tokenizer.pad_token_id
    widths = tf.constant([b - 1 for b in bucket_boundaries(preprocessor.sequence_length)], tf.int64)
    ids = token_id_columns(columns, preprocessor)
    targets = tf.constant(labels)

    def gather(index):
        ragged = [tf.gather(column, index) for column in ids]
        longest = tf.reduce_max([tf.reduce_max(r.row_lengths()) for r in ragged])
        width = tf.gather(widths, tf.searchsorted(widths, tf.reshape(longest, [1]))[0])
        shape = tf.stack([tf.size(index, tf.int64), width])
        padded = tuple(tf.cast(r.to_tensor(pad, shape=shape), tf.int32) for r in ragged)
        return padded, tf.gather(targets, index)

    def plan():
        if passes is None:
            yield from plans.next_pass()
            return
        for index in passes:
            yield from plans.plan(index)

    ds = tf.data.Dataset.from_generator(plan, output_signature=tf.TensorSpec([None], tf.int64))
    ds = ds.map(gather, num_parallel_calls=tf.data.AUTOTUNE)
    if plans.num_batches is None:
        return ds
    return ds.apply(tf.data.experimental.assert_cardinality(plans.num_batches * len(passes or [0])))
