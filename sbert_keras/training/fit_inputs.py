"""The checks of what `fit` and `train_objective` receive: text columns and label arrays, each named.

Keras and KerasHub take whatever they are given and fail late: a missing
text column or an empty list fails inside KerasHub's preprocessor with a
page of traced graph; string labels or labels of shape `(n, 2)` fail in
the loss's gradient with an `InvalidArgumentError`; labels as strings of
numbers pass `np.asarray(..., "float32")` silently; `(n, 1)` labels
broadcast against `(n,)` outputs into an `(n, n)` loss. These checks run
before anything is traced, in plain NumPy, and raise one line naming the
argument (`x[1] (sentence_b)`, `validation_data[1]`, `train.labels`) and the
item. Whether the labels suit the loss (their range) is
`fit_checks.check_labels`'s job; `model.preprocessor.check_texts` checks each
text.

Example:
```python
check_text_columns((["a cat"], ["a dog", "a fox"]), ("sentence_a", "sentence_b"), "x")
check_label_array(["0.5", "1"], "y")  # TypeError: `y` must hold numbers ...
```
"""

import dataclasses
import numbers

import keras
import numpy as np
from keras import tree

from sbert_keras.model.preprocessor import check_texts
from sbert_keras.training.host_pipelines import ArrayBatches
from sbert_keras.utils import backends
from sbert_keras.utils import defaults
from sbert_keras.utils.backends import tensorflow as tf


def rows(value):
    """The number of rows of an array, tensor or list (None when it has none)."""
    shape = getattr(value, "shape", None)
    if shape is not None:
        return int(shape[0]) if len(shape) and shape[0] is not None else None
    return len(value) if isinstance(value, (list, tuple)) else None


def check_batched(dataset, argument):
    """Raises a `ValueError` naming `argument` when `dataset` yields single examples."""
    specs = [s for s in tf.nest.flatten(dataset.element_spec) if hasattr(s, "shape")]
    if any(s.shape.rank == 0 for s in specs):
        raise ValueError(
            f"The tf.data.Dataset passed as `{argument}` yields single examples (an element has shape ()); "
            "`fit` takes batches: batch it first, e.g. `dataset.batch(16)`."
        )


def _is_text_column(value):
    if isinstance(value, (list, tuple)):
        return True
    return isinstance(value, np.ndarray) and value.dtype.kind in "USO"


def check_text_columns(x, roles, argument="x"):
    """`{name: column}` of `x`'s columns after checking their count and texts; raises naming the bad one.

    Args:
        x: a tuple or list with one column of texts per role, one list of
            texts (a one-role model), a dict, or arrays or tensors (not
            checked here beyond their rows).
        roles: tuple of str. The model's `active_roles`.
        argument: str. How messages name `x`.

    Raises:
        ValueError: the wrong number of columns, a column with no rows, a
            `None` text (its position named).
        TypeError: a text that is not a string.
    """
    if isinstance(x, dict):
        return {f"{argument}[{key!r}]": value for key, value in x.items()}
    if isinstance(x, (list, tuple)) and not len(x):
        raise ValueError(f"`{argument}` holds no texts; training needs at least one example.")
    if isinstance(x, str) or (isinstance(x, (list, tuple)) and all(isinstance(v, (str, type(None))) for v in x)):
        columns = [x]  # one column of texts
    elif isinstance(x, (list, tuple)):
        columns = list(x)
    else:
        return {argument: x}
    if len(columns) != len(roles):
        raise ValueError(
            f"`{argument}` has {len(columns)} text column(s); this model takes {len(roles)}, one list of texts "
            f"per role {tuple(roles)}, e.g. `({', '.join(roles)})`."
        )
    named = {}
    for i, (role, column) in enumerate(zip(roles, columns, strict=True)):
        name = f"{argument}[{i}] ({role})" if len(roles) > 1 else argument
        if _is_text_column(column):
            check_texts(column, what=name)
        named[name] = column
    for name, column in named.items():
        if rows(column) == 0:
            raise ValueError(f"`{name}` holds no texts; training needs at least one example.")
    return named


def check_label_array(labels, argument, one_per_row=True):
    """Raises naming `argument` unless `labels` are numbers (one per row when `one_per_row`).

    Args:
        labels: array-like or tensor of labels.
        argument: str. How the message names them, e.g. `"y"`.
        one_per_row: bool. Require shape `(n,)`: the pair and class
            models' losses compare one label with one output per row.

    Raises:
        TypeError: labels that are not numbers (strings, `None`, ragged lists).
        ValueError: labels of another shape than `(n,)`.
    """
    if labels is None:
        raise TypeError(f"`{argument}` is None; this objective needs one label per example.")
    try:
        array = np.asarray(labels.numpy() if backends.is_tf_tensor(labels) else labels)
    except ValueError:  # ragged lists
        raise TypeError(f"`{argument}` must be an array of numbers, one label per example; it is ragged.") from None
    if array.dtype.kind not in "biuf":
        items = array.reshape(-1).tolist()
        bad = next((i for i, v in enumerate(items) if not isinstance(v, numbers.Real)), 0) if items else 0
        shown = f"item {bad} is {items[bad]!r:.40}" if items else f"dtype {array.dtype}"
        raise TypeError(
            f"`{argument}` must hold numbers, one label per example; {shown}. "
            "Convert them first, e.g. `np.asarray(labels, 'float32')`."
        )
    if one_per_row and array.ndim != 1:
        raise ValueError(f"`{argument}` must have shape (n,): one label per example; received shape {array.shape}.")


def check_examples(examples, argument="train"):
    """Checks a data dataclass (`examples.SentencePairs`, `Triplets`, ...): each field one entry per example.

    Args:
        examples: a dataclass of `sbert_keras.data.examples`.
        argument: str. How messages name it.

    Raises:
        TypeError: a text field given as one string, labels that are not numbers.
        ValueError: a field whose length differs from the first's, labels not of shape `(n,)`.
    """
    n, first = None, None
    for field in dataclasses.fields(examples):
        value = getattr(examples, field.name)
        name = f"{argument}.{field.name}"
        if field.name == "labels" and value is None:
            raise TypeError(f"`{name}` is None; these examples need one label each.")
        if value is None or isinstance(value, (int, float)) or field.name == "classes":
            continue
        if isinstance(value, str):
            raise TypeError(f"`{name}` must be a list of texts, one per example; received one str.")
        if field.name == "labels":
            check_label_array(value, name, one_per_row=True)
        else:
            check_texts(value, what=name)
        count = rows(value) if rows(value) is not None else len(value)
        if n is None:
            n, first = count, name
        elif count != n:
            raise ValueError(f"`{name}` has {count} entries and `{first}` {n}; every field needs one per example.")


def array_batches(
    x, y=None, sample_weight=None, batch_size=None, shuffle=True, validation_split=None, preprocessor=None
):
    """Arrays given to `fit` as batches in a new order each epoch, as Keras' `fit` gives them.

    KerasHub's `Task.fit` batches arrays in their order, so Keras' default
    `shuffle=True` is ignored with a warning the caller did not cause. This
    builds the dataset Keras would: `validation_split` takes the last rows
    (as Keras does), the rest are reshuffled every epoch unless `shuffle` is
    false, in batches of `batch_size` (Keras' default 32).

    Args:
        x: the text columns (a tuple, list or dict of columns).
        y: labels or None.
        sample_weight: per-row weights or None.
        batch_size: int or None (32).
        shuffle: bool. A new order each epoch.
        validation_split: float in [0, 1) or None. The fraction of the last
            rows kept apart for validation.
        preprocessor: callable `(x, y, sample_weight) -> batch` or None (the
            model's preprocessor, e.g. a `SiamesePreprocessor`). On JAX and
            PyTorch it tokenises each batch on the host; on TensorFlow the
            model maps it over the tf.data batches itself.

    Returns:
        `(dataset, validation)`: a `tf.data.Dataset` on TensorFlow, else a
        `keras.utils.PyDataset` (`host_pipelines.ArrayBatches`) of the
        preprocessed batches; `validation` is `(x, y, sample_weight)` of
        the split rows, or None.

    Example:
    ```python
    ds, _ = array_batches((["a cat", "a dog"], ["a fox", "a cow"]), np.array([0.5, 0.2]), batch_size=2)
    ```
    """
    y, sample_weight = (None if v is None else _as_array(v) for v in (y, sample_weight))
    data = keras.utils.pack_x_y_sample_weight(_columns(x), y, sample_weight)
    n = rows(tree.flatten(data)[0])
    validation = None
    if validation_split:
        if not 0 < validation_split < 1:
            raise ValueError(f"`validation_split` must be in (0, 1). Received {validation_split!r}.")
        kept = n - int(n * validation_split)
        validation = keras.utils.unpack_x_y_sample_weight(tree.map_structure(lambda a: a[kept:], data))
        data, n = tree.map_structure(lambda a: a[:kept], data), kept
    if not backends.uses_tensorflow():
        return ArrayBatches(data, batch_size, shuffle, preprocessor), validation
    dataset = tf.data.Dataset.from_tensor_slices(data)
    if shuffle:
        dataset = dataset.shuffle(n, reshuffle_each_iteration=True)
    return dataset.batch(batch_size or defaults.KERAS_BATCH_SIZE), validation


def _columns(x):
    """`x`'s text columns as arrays: a dict or a sequence of columns, or one column."""
    if isinstance(x, dict):
        return {name: _as_array(column) for name, column in x.items()}
    if isinstance(x, (list, tuple)) and x and not isinstance(x[0], (str, bytes)):
        return tuple(_as_array(column) for column in x)
    return _as_array(x)


def _as_array(value):
    """A column as NumPy (a list of texts as a string array), a tensor as it is."""
    return value if backends.is_tf_tensor(value, ragged=True) else np.asarray(value)


def on_host(preprocessor, x, y=None, sample_weight=None):
    """`(x, y, sample_weight)` through `preprocessor` on the host (JAX, PyTorch); as they are without one.

    A `keras.utils.PyDataset` or None is passed through. The three are passed
    apart: a pair of text columns alone would read as `(x, y)`.

    Args:
        preprocessor: a model's preprocessor, or None (on TensorFlow).
        x: texts (columns), token ids, a `PyDataset` or None.
        y: labels or None.
        sample_weight: weights or None.
    """
    if preprocessor is None or x is None or isinstance(x, keras.utils.PyDataset):
        return x, y, sample_weight
    return keras.utils.unpack_x_y_sample_weight(preprocessor(x, y, sample_weight))
