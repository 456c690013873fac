"""Quantized embeddings for storage and search: sentence-transformers' `quantize_embeddings` in NumPy.

`encode(precision=...)` and `quantize_embeddings` turn float32 sentence
embeddings into the compact forms sentence-transformers defines, with its
exact semantics and dtypes, so embeddings stored by either library can be
searched by the other:

- `"float32"`: the float vectors, as float32.
- `"int8"` / `"uint8"`: scalar quantization. Each dimension's range (its
  minimum and maximum over `calibration_embeddings`, or given as `ranges`
  `(2, dim)`, or else over the embeddings themselves) is cut into 255 equal
  steps; a value becomes `floor((x - min) / step)` clipped to [0, 255]
  (`uint8`), minus 128 for `int8`. A dimension whose range is empty has
  step 1.
- `"binary"` / `"ubinary"`: one bit per dimension, set where the value is
  above 0, packed 8 dimensions a byte (`np.packbits`, the first dimension in
  the high bit; a last partial byte padded with zeros): `uint8` for
  `ubinary`, and `int8` (the byte minus 128) for `binary`. `dim` dimensions
  give `ceil(dim / 8)` bytes.

sentence-transformers is a PyTorch library and not a dependency of this
package, so its function is written again here, on NumPy arrays, step for
step (the same float32 arithmetic, so both give the same buckets and bits
for the same float vectors; `tests/retrieval/test_quantization_peer.py` checks it
against sentence-transformers itself). Ranges computed from the embeddings
being quantized depend on that very batch: like sentence-transformers this
warns below `QUANTIZATION_CALIBRATION_MIN` embeddings and refuses a single
one; give `calibration_embeddings` (a representative sample) or `ranges`
for stable buckets.

Quantized embeddings are for storing and for searchers built for them
(faiss or usearch binary and int8 indexes, Hamming distance on packed bits).
The float32 scores of `sbert_keras.retrieval.scores` refuse int8 and uint8
arrays (`as_matrix`) instead of scoring packed bits as if they were floats.

Example:
```python
import numpy as np

from sbert_keras.retrieval.quantization import quantize_embeddings

embeddings = np.random.default_rng(0).normal(size=(200, 384)).astype("float32")
quantize_embeddings(embeddings, "ubinary").shape  # (200, 48), uint8
quantize_embeddings(embeddings[:10], "int8", calibration_embeddings=embeddings).dtype  # int8
```
"""

import warnings

import numpy as np

from sbert_keras.utils.defaults import COMPUTES
from sbert_keras.utils.defaults import PRECISIONS
from sbert_keras.utils.defaults import QUANTIZATION_CALIBRATION_MIN


def check_precision(precision, compute_hint=False):
    """`precision` as a word of `defaults.PRECISIONS` (`None` is `"float32"`, as in sentence-transformers).

    Args:
        precision: str or None. The output precision asked for.
        compute_hint: bool. Whether a compute word (`"auto"`, `"bfloat16"`,
            `"float16"`) is named as `encode`'s earlier meaning of
            `precision`, pointing at `compute=`.

    Raises:
        ValueError: one line naming `precision` and the accepted words.

    Example:
    ```python
    check_precision("ubinary")  # "ubinary"
    ```
    """
    if precision is None:
        return "float32"
    if isinstance(precision, str) and precision in PRECISIONS:
        return precision
    accepted = ", ".join(PRECISIONS)
    if compute_hint and isinstance(precision, str) and precision in COMPUTES:
        raise ValueError(
            f"precision={precision!r} names a compute path; use compute={precision!r} (precision now quantizes "
            f"the output embeddings as in sentence-transformers: {accepted})."
        )
    raise ValueError(f"`precision` must be one of {accepted}. Received {precision!r}.")


def refuse_quantized(x, name):
    """Raises if `x` is an int8 or uint8 array: quantized codes, not float vectors to score or index.

    Args:
        x: array-like. What a float32 scorer or index was given.
        name: str. The argument's name, for the message.

    Example:
    ```python
    refuse_quantized(np.zeros((2, 8), "float32"), "embeddings")  # passes
    ```
    """
    if getattr(x, "dtype", None) in (np.int8, np.uint8):
        raise ValueError(
            f"`{name}` holds {np.dtype(x.dtype).name} (quantized) embeddings; float32 scores need float embeddings "
            "(encode with precision='float32'; search quantized ones with an index built for them)."
        )


def _as_float_array(embeddings, name):
    """`embeddings` as a float NumPy array (1-D or 2-D); integer (already quantized) input is refused."""
    if hasattr(embeddings, "numpy") and not isinstance(embeddings, np.ndarray):
        embeddings = embeddings.numpy()  # an eager TensorFlow or PyTorch tensor
    try:
        array = np.asarray(embeddings)
    except (TypeError, ValueError) as error:
        raise TypeError(f"`{name}` must be a float array (n, dim). {error}") from None
    if array.dtype in (np.int8, np.uint8):
        raise ValueError(f"`{name}` must be float embeddings to quantize; received {array.dtype} (already quantized).")
    if array.dtype.kind in "iub":
        array = array.astype(np.float64)  # NumPy's promotion of integers against float32 ranges
    if array.dtype.kind != "f":
        raise TypeError(f"`{name}` must be a float array (n, dim); received dtype {array.dtype}.")
    if array.ndim not in (1, 2):
        raise ValueError(f"`{name}` must be 1-D or 2-D. Received shape {array.shape}.")
    return array


def quantization_ranges(embeddings, precision="int8", calibration_embeddings=None):
    """Per-dimension `(2, dim)` minimum and maximum that int8 / uint8 buckets are cut from.

    Args:
        embeddings: float array `(n, dim)`. Used when no calibration is given.
        precision: str. `"int8"` or `"uint8"`, for the messages.
        calibration_embeddings: float array `(m, dim)` or None. A
            representative sample to take the ranges from.

    Raises:
        ValueError: no calibration and a single embedding (its range would
            be empty); the message says what to pass instead.

    Example:
    ```python
    quantization_ranges(np.array([[0.0, 1.0], [2.0, -1.0]])).tolist()  # [[0.0, -1.0], [2.0, 1.0]]
    ```
    """
    if calibration_embeddings is None:
        embeddings = _as_float_array(embeddings, "embeddings")
        if embeddings.ndim == 1 or embeddings.shape[0] == 1:
            raise ValueError(
                f"Cannot compute {precision} quantization ranges from a single embedding; "
                "pass `ranges` or `calibration_embeddings` (a representative set of embeddings)."
            )
        if embeddings.shape[0] < QUANTIZATION_CALIBRATION_MIN:
            warnings.warn(
                f"Computing {precision} quantization ranges from {embeddings.shape[0]} embeddings; they are more "
                "stable from `ranges` or `calibration_embeddings` of more embeddings.",
                UserWarning,
                stacklevel=3,
            )
        calibration_embeddings = embeddings
    else:
        calibration_embeddings = _as_float_array(calibration_embeddings, "calibration_embeddings")
        calibration_embeddings = calibration_embeddings.reshape(-1, calibration_embeddings.shape[-1])
    return np.vstack((np.min(calibration_embeddings, axis=0), np.max(calibration_embeddings, axis=0)))


def _check_dims(embeddings, ranges, calibration_embeddings):
    dim = embeddings.shape[-1]
    if ranges is not None:
        ranges = _as_float_array(ranges, "ranges")
        if ranges.shape != (2, dim):
            raise ValueError(f"`ranges` must have shape (2, {dim}): a min and a max per dimension. Got {ranges.shape}.")
    if calibration_embeddings is not None:
        shape = np.shape(calibration_embeddings)
        if not shape or shape[-1] != dim:
            raise ValueError(f"`calibration_embeddings` must have {dim} dimensions, as the embeddings. Got {shape}.")
    return ranges


def quantize_embeddings(embeddings, precision, ranges=None, calibration_embeddings=None):
    """Quantizes float embeddings to `precision`, as sentence-transformers' `quantize_embeddings`.

    Args:
        embeddings: float array `(n, dim)` or `(dim,)` (a NumPy array, a
            list, or an eager tensor), or a list of float `(tokens, dim)`
            matrices (quantized with shared ranges).
        precision: str. `"float32"`, `"int8"`, `"uint8"`, `"binary"` or
            `"ubinary"` (see the module docstring); `None` is `"float32"`.
        ranges: float array `(2, dim)` or None. Per-dimension minimum and
            maximum for int8 / uint8 (ignored otherwise).
        calibration_embeddings: float array `(m, dim)` or None. Embeddings
            to take the int8 / uint8 ranges from when `ranges` is None;
            with neither, the ranges come from `embeddings` themselves
            (a warning below 100 embeddings, an error for one).

    Returns:
        A NumPy array: float32 `(n, dim)`, int8 or uint8 `(n, dim)`, or
        int8 (binary) or uint8 (ubinary) `(n, ceil(dim / 8))`; a list for a
        list of matrices. An empty `(0, dim)` input gives the empty array of
        the output's shape and dtype.

    Raises:
        ValueError: an unknown `precision`, integer (already quantized)
            embeddings, input that is not 1-D or 2-D, `ranges` not
            `(2, dim)`, or a single embedding to calibrate on.

    Example:
    ```python
    vectors = encoder.encode(texts)
    codes = quantize_embeddings(vectors, "int8", calibration_embeddings=encoder.encode(sample_texts))
    ```
    """
    precision = check_precision(precision)
    if isinstance(embeddings, list) and embeddings and np.ndim(embeddings[0]) == 2:
        matrices = [_as_float_array(matrix, "embeddings") for matrix in embeddings]
        if precision.endswith("int8") and ranges is None:
            data = np.concatenate(matrices) if calibration_embeddings is None else calibration_embeddings
            if len(data):
                ranges = quantization_ranges(data, precision, calibration_embeddings)
        return [quantize_embeddings(matrix, precision, ranges, calibration_embeddings) for matrix in matrices]
    embeddings = _as_float_array(embeddings, "embeddings")
    ranges = _check_dims(embeddings, ranges, calibration_embeddings)
    if embeddings.ndim == 2 and embeddings.shape[0] == 0 and precision != "float32":
        width = embeddings.shape[1] if precision.endswith("int8") else (embeddings.shape[1] + 7) // 8
        return np.zeros((0, width), dtype=np.int8 if precision in ("int8", "binary") else np.uint8)
    if precision == "float32":
        return embeddings.astype(np.float32)
    if precision.endswith("int8"):
        if ranges is None:
            ranges = quantization_ranges(embeddings, precision, calibration_embeddings)
        ranges = ranges.astype(np.float32, copy=False)
        starts = ranges[0, :]
        steps = (ranges[1, :] - starts) / 255
        steps = np.where(steps == 0, 1, steps)
        buckets = np.clip(np.floor((embeddings - starts) / steps), 0, 255)
        return buckets.astype(np.uint8) if precision == "uint8" else (buckets - 128).astype(np.int8)
    packed = np.packbits(embeddings > 0, axis=-1)
    return packed if precision == "ubinary" else (packed.astype(np.int16) - 128).astype(np.int8)
