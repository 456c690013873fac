"""The batches of each pass over the training data, planned in NumPy: what every backend's pipeline batches.

`pipelines.siamese_dataset` (tf.data, on TensorFlow) and
`host_pipelines.HostBatches` (a `keras.utils.PyDataset`, on JAX and
PyTorch) take their batches from here, so that the same seed gives the same
example indices per batch on every backend:

- the order of a pass (`pass_order`): `np.random.default_rng([seed, pass])`,
  fixed by the seed and the pass's index whatever ran before;
- `"bucket"`: the length buckets (`bucket_boundaries`) filled in that order
  as `tf.data.Dataset.bucket_by_sequence_length` fills them
  (`bucket_batches`), each batch padded to its bucket's length;
- `"no_duplicates"` and `"shuffle"`: the row plans of `PassPlans`, each batch
  padded to the smallest bucket length its longest text fits
  (`batch_width`).

No library has these plans (sentence-transformers' `NoDuplicatesBatchSampler`
is a PyTorch sampler, tf.data has no sampler at all), hence this module.
"""

import warnings

import numpy as np

from sbert_keras.model.preprocessor import check_texts
from sbert_keras.utils.defaults import BATCHING
from sbert_keras.utils.defaults import BATCHINGS
from sbert_keras.utils.defaults import BUCKETS
from sbert_keras.utils.defaults import DEFAULT_BATCHING


def bucket_boundaries(sequence_length):
    """Upper bounds (exclusive) of the length buckets up to `sequence_length`."""
    lengths = [b for b in BUCKETS if b < sequence_length] + [sequence_length]
    return [b + 1 for b in lengths]


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


def pass_order(n, shuffle, seed, index):
    """The row order of pass `index` (from 0): `np.random.default_rng([seed, index])`'s permutation, or `arange`.

    Args:
        n: int. Rows.
        shuffle: bool. A new order each pass (else the rows in order).
        seed: int. The run's seed (a random one when the caller has none).
        index: int. The pass.
    """
    return np.random.default_rng([seed, index]).permutation(n) if shuffle else np.arange(n)


def batch_width(longest, sequence_length):
    """The padded length of a batch whose longest row has `longest` tokens: the smallest bucket length it fits."""
    widths = np.array(bucket_boundaries(sequence_length)) - 1
    return int(widths[np.searchsorted(widths, longest)])


def bucket_batches(lengths, order, sequence_length, batch_size):
    """Batches of row indices as `bucket_by_sequence_length` forms them from rows in `order`.

    Each row goes to its length's bucket; a bucket that reaches
    `batch_size` rows is a batch, at once; at the end of the pass the
    buckets still holding rows close, in the order of their lengths.

    Args:
        lengths: int array `(n,)`: each row's longest role, in tokens (`row_lengths`).
        order: int array: the rows of the pass, in order.
        sequence_length: int. The preprocessor's `sequence_length`.
        batch_size: int. Rows per full batch.

    Returns:
        list of int64 arrays.

    Example:
    ```python
    bucket_batches(np.array([3, 40, 4, 5]), np.arange(4), 64, 2)  # [array([0, 2]), array([1]), array([3])]
    ```
    """
    buckets = np.searchsorted(bucket_boundaries(sequence_length), np.asarray(lengths), side="right")
    windows, batches = {}, []
    for i in np.asarray(order).tolist():
        window = windows.setdefault(int(buckets[i]), [])
        window.append(i)
        if len(window) == batch_size:
            batches.append(np.array(window, "int64"))
            window.clear()
    batches.extend(np.array(windows[b], "int64") for b in sorted(windows) if windows[b])
    return batches


def check_columns(columns, labels, roles, label_dtype):
    """`(columns, labels)` checked: one column of texts per role, all as long, one label per row (zeros for None).

    Args:
        columns: list of lists of str, one per role.
        labels: array-like or None.
        roles: tuple of str.
        label_dtype: str. The labels' dtype.
    """
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
    return columns, labels
