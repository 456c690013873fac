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

Every dataset states its number of batches (`cardinality()`), so that
Keras' progress bar shows a total and the learning-rate schedule spans the
steps that run. tf.data cannot know it (buckets fill by length, plans come
from a generator), so it is counted here and set with
`tf.data.experimental.assert_cardinality`, which also fails loudly if a
pass ever yields another number: for buckets, each bucket's batches from
the token lengths (`bucket_batch_count`); for plans, from the plans drawn
ahead (`PassPlans`).
"""

import warnings

import numpy as np

from sbert_keras.model.preprocessor import check_texts
from sbert_keras.utils.backends import tensorflow as tf
from sbert_keras.utils.defaults import BATCHING
from sbert_keras.utils.defaults import BATCHINGS
from sbert_keras.utils.defaults import BUCKETS
from sbert_keras.utils.defaults import DEFAULT_BATCHING
from sbert_keras.utils.defaults import PAPER_BATCH_SIZE


def bucket_boundaries(sequence_length):
    """Upper bounds (exclusive) of the length buckets up to `sequence_length`."""
    lengths = [b for b in BUCKETS if b < sequence_length] + [sequence_length]
    return [b + 1 for b in lengths]


def row_lengths(columns, preprocessor):
    """`(n,)` int64: each row's length in tokens (start and end included, cut at `sequence_length`), its longest role's.

    The lengths `_bucketed` sorts rows into buckets by, computed the same way
    (`ragged_token_ids`) in one tf.data pass over the texts.
    """

    def longest(*texts):
        return tf.reduce_max(tf.stack([preprocessor.ragged_token_ids(t)[0].row_lengths() for t in texts]), axis=0)

    ds = tf.data.Dataset.from_tensor_slices(tuple(columns)).batch(1024)
    ds = ds.map(longest, num_parallel_calls=tf.data.AUTOTUNE)
    return np.concatenate([np.zeros(0, "int64"), *ds.as_numpy_iterator()])


def bucket_batch_count(lengths, sequence_length, batch_size):
    """The batches of one pass of `bucket_by_sequence_length`: `ceil(rows / batch_size)` summed over buckets.

    A row of length `l` goes to the bucket `i` with `boundaries[i - 1] <= l <
    boundaries[i]`, as tf.data assigns it; each bucket yields its full
    batches as they fill and its partial one at the end, whatever the order.

    Args:
        lengths: int array `(n,)`, e.g. from `row_lengths`.
        sequence_length: int. The preprocessor's `sequence_length`.
        batch_size: int. Rows per full batch.
    """
    buckets = np.searchsorted(bucket_boundaries(sequence_length), lengths, side="right")
    return int(np.sum(-(-np.bincount(buckets) // batch_size)))


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


def split_to_count(batches, count):
    """`batches` made exactly `count` long: the largest split in two while too few.

    The halves of a batch with no repeated text have none either. A plan
    longer than `count` loses its last (short) batches, with a warning.

    Args:
        batches: list of int arrays, a pass's plan.
        count: int. The batches the pass must have.
    """
    batches = list(batches)
    while len(batches) < count and max(map(len, batches), default=0) > 1:
        i = max(range(len(batches)), key=lambda j: len(batches[j]))
        half = (len(batches[i]) + 1) // 2
        batches[i : i + 1] = [batches[i][:half], batches[i][half:]]
    if len(batches) > count:
        dropped = sum(map(len, batches[count:]))
        warnings.warn(
            f"This pass's plan has {len(batches)} batches, more than the {count} of the passes planned ahead "
            f"(`epochs`); its last {len(batches) - count} batch(es), {dropped} row(s), are left out.",
            stacklevel=2,
        )
    return batches[:count]


class PassPlans:
    """The row batches of each pass over the data (what `_planned` yields).

    The plan of pass `p` comes from `np.random.default_rng([seed, p])` (or
    one unseeded generator). A no-duplicates plan's number of batches depends
    on the order drawn (a pass that cannot fill its last batches closes them
    short), so with `passes` the first `passes` plans are drawn ahead and
    each pass gets their largest count (`split_to_count`): `num_batches`,
    the dataset's cardinality. Random batches always number `ceil(n / batch_size)`.

    Args:
        n: int. Rows.
        batch_size: int. Rows per full batch.
        shuffle: bool. A new order each pass (else the rows in order).
        seed: int or None. The seed of the orders.
        codes: int array `(n, k)` of `text_codes`, or None: no-duplicates
            batches, or plain slices of the order.
        passes: int or None. The passes planned ahead (the epochs); None:
            each planned when it starts, their count unknown (`num_batches`
            None) for no-duplicates batches.
    """

    def __init__(self, n, batch_size, shuffle=True, seed=None, codes=None, passes=None):
        self.n, self.batch_size, self.shuffle, self.seed, self.codes = n, batch_size, shuffle, seed, codes
        self.rng = np.random.default_rng(seed) if seed is None else None
        self.drawn = 0
        self.ahead = [self.draw() for _ in range(passes or 0)] if codes is not None else []
        self.num_batches = -(-n // batch_size) if codes is None else max(map(len, self.ahead), default=None)

    def draw(self, index=None):
        """Pass `index`'s plan (the next pass's when None), as drawn (a list of int64 arrays)."""
        index = self.drawn if index is None else index
        order = np.arange(self.n)
        if self.shuffle:
            order = (self.rng or np.random.default_rng([self.seed, index])).permutation(self.n)
        self.drawn = max(self.drawn, index + 1)
        if self.codes is not None:
            return no_duplicate_batches(self.codes, self.batch_size, order)
        return [order[i : i + self.batch_size] for i in range(0, self.n, self.batch_size)]

    def plan(self, index):
        """The plan of pass `index` (from 0), `num_batches` long when that is known: the same in every process."""
        plan = self.ahead[index] if index < len(self.ahead) else self.draw(index)
        return plan if self.num_batches is None else split_to_count(plan, self.num_batches)

    def next_pass(self):
        """The plan of the pass that starts now, `num_batches` long when that is known."""
        plan = self.ahead.pop(0) if self.ahead else self.draw()
        return plan if self.num_batches is None else split_to_count(plan, self.num_batches)


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
    texts = [tf.constant(c, tf.string) for c in columns]
    targets = tf.constant(labels)

    def tokenize(index):
        ragged = [preprocessor.ragged_token_ids(tf.gather(t, index))[0] for t in texts]
        y = tf.gather(targets, index)
        return tuple(r.to_tensor(pad) for r in ragged), tuple(r.row_lengths() for r in ragged), y

    def trim(ids, lengths, y):
        return tuple(t[:n] for t, n in zip(ids, lengths, strict=True)), y

    boundaries = bucket_boundaries(preprocessor.sequence_length)

    def one_pass(order):
        # Tokenise in large batches (fast), then split back into examples.
        ds = order.batch(1024).map(tokenize, num_parallel_calls=tf.data.AUTOTUNE)
        ds = ds.unbatch().map(trim, num_parallel_calls=tf.data.AUTOTUNE)
        return ds.bucket_by_sequence_length(
            element_length_func=lambda ids, y: tf.reduce_max([tf.shape(t)[0] for t in ids]),
            bucket_boundaries=boundaries,
            bucket_batch_sizes=[batch_size] * (len(boundaries) + 1),
            padding_values=(tuple(tf.constant(pad, tf.int32) for _ in columns), None),
            pad_to_bucket_boundary=True,
        )

    count = bucket_batch_count(row_lengths(columns, preprocessor), preprocessor.sequence_length, batch_size)
    if passes is None:
        order = tf.data.Dataset.range(n)
        if shuffle:
            order = order.shuffle(n, seed=seed, reshuffle_each_iteration=True)
        return one_pass(order).apply(tf.data.experimental.assert_cardinality(count))
    pass_seed = np.random.randint(2**31) if seed is None else seed

    def pass_order(index):
        if not shuffle:
            return tf.data.Dataset.range(n)
        keys = tf.random.stateless_uniform([n], seed=tf.stack([tf.constant(pass_seed, tf.int64), index]))
        return tf.data.Dataset.from_tensor_slices(tf.argsort(keys, stable=True))

    ds = tf.data.Dataset.range(passes.start, passes.stop).flat_map(lambda index: one_pass(pass_order(index)))
    return ds.apply(tf.data.experimental.assert_cardinality(count * len(passes)))


def _planned(columns, labels, preprocessor, plans, passes=None):
    """Batches of the row plans of a `PassPlans`, one plan per pass, padded to a bucket length.

    A seed gives the same batches each run; `dataset.skip(k)` (a resumed
    backup) skips the first pass's first `k` batches. With `passes`, one
    iteration yields those passes' plans (`PassPlans.plan`).
    """
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
