"""Argument checks shared by the encoder, search, training and the CLI.

Plain Python/NumPy (no Keras or TensorFlow). Keras and scikit-learn check
their own arguments (`sklearn.utils.check_scalar`, `check_array`), but with
their own messages and types; these name the argument as the user wrote it
(`batch_size`, `corpus_embeddings`) and the bad row, in one place.
"""

import numbers

import numpy as np

from sbert_keras.utils.defaults import EXPORT_COMPUTES


class NotAnIntegerError(TypeError, ValueError):
    """A count given as something other than an integer (`2.5`, `"8"`, `True`).

    A `TypeError`, as Python raises for a wrong type, and a `ValueError` too,
    so that code catching either (the errors of a bad argument) sees it.
    """


def check_positive_int(value, name):
    """`value` as an `int` >= 1, or a clear error naming `name`.

    Python and NumPy integers are accepted; `bool`, floats (even `8.0`),
    strings and `None` are not.

    Args:
        value: the argument to check.
        name: str. The argument's name, for the message.

    Raises:
        NotAnIntegerError: `value` is not an integer (a `TypeError` and a `ValueError`).
        ValueError: `value` < 1.

    Example:
    ```python
    batch_size = check_positive_int(np.int64(8), "batch_size")  # 8
    ```
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise NotAnIntegerError(f"`{name}` must be an integer >= 1. Received {value!r} of type {type(value).__name__}.")
    if value < 1:
        raise ValueError(f"`{name}` must be an integer >= 1. Received {value!r}.")
    return int(value)


def check_export_compute(compute, name="compute"):
    """`compute` if a SavedModel can run it (`defaults.EXPORT_COMPUTES`), or one line naming `name`.

    Args:
        compute: str or None (`"auto"`).
        name: str. The argument as the user wrote it (`"--compute"` for the CLI).

    Raises:
        ValueError: `"int8"` (saying what to export instead) or an unknown word.

    Example:
    ```python
    check_export_compute("bfloat16")  # "bfloat16"
    ```
    """
    compute = "auto" if compute is None else compute
    if compute == "int8":
        raise ValueError(
            f"{name}='int8' cannot be exported: a SavedModel runs float matmuls (TensorFlow's int8 kernels are "
            "slower than its bfloat16 ones and round otherwise than encode's int8). Export with 'auto' or "
            "'float32', and quantize stored vectors with encode(precision='int8')."
        )
    if compute not in EXPORT_COMPUTES:
        raise ValueError(f"{name} must be one of {EXPORT_COMPUTES}. Received {compute!r}.")
    return compute


def check_finite(embeddings, name):
    """Raises if a row of a 2-D `embeddings` array holds NaN or inf.

    NaN compares false with everything, so a NaN row would otherwise be
    ranked first, dropped or grouped silently.

    Args:
        embeddings: np.ndarray. Float embeddings `(n, dim)`.
        name: str. The argument's name, for the message.

    Raises:
        ValueError: naming the first bad row (0-based) and how many there are.

    Example:
    ```python
    check_finite(np.zeros((2, 3), "float32"), "embeddings")  # passes
    ```
    """
    bad = np.flatnonzero(~np.isfinite(embeddings).all(axis=1))
    if len(bad):
        row = embeddings[bad[0]]
        kind = "NaN" if np.isnan(row).any() else "inf"
        more = f" ({len(bad)} rows in all, e.g. {bad[:5].tolist()})" if len(bad) > 1 else ""
        raise ValueError(
            f"`{name}` row {bad[0]} contains {kind}{more}; embeddings must be finite. "
            "Check the model or the inputs that produced them."
        )


def check_text_list(values, name, allow_empty=True):
    """`values` as a list of str, naming the first bad item.

    Args:
        values: iterable of str (a single string is refused).
        name: str. The argument's name, for the message.
        allow_empty: bool. If False, a blank text is a `ValueError`.
    """
    if isinstance(values, (str, bytes)):
        raise TypeError(f"`{name}` must be a list of strings, not a single string.")
    values = list(values)
    for i, value in enumerate(values):
        if not isinstance(value, str):
            raise TypeError(f"`{name}` item {i} must be a str. Received {type(value).__name__}: {value!r}.")
        if not allow_empty and not value.strip():
            raise ValueError(f"`{name}` item {i} is empty; a triplet file cannot hold an empty text.")
    return values
