"""One compute vocabulary for inference and training.

Users name a compute path with the words of `defaults.COMPUTES`: `"auto"`,
`"float32"`, `"bfloat16"`, `"float16"` (and `"int8"`, for `encode` and the
export only): the dtype the matmuls run in. `encode(compute=...)`,
`set_compute`, `sbert-keras train --compute`, `SentenceEncoder.from_preset(dtype=...)`
and the benchmarks all take these words. Where a Keras graph runs that way
(training, the backbone built by `from_preset`), the word maps to the Keras
dtype policy of `defaults.POLICIES` (`"bfloat16"` -> `"mixed_bfloat16"`):
float32 variables, low-precision matmuls, pooling and losses float32. Keras'
policy names (`"mixed_bfloat16"`, `"mixed_float16"`) are still accepted, with
a `DeprecationWarning` naming the new word. `"auto"` follows the hardware with
the one rule of `sbert_keras.utils.hardware.auto_precision` (float16 on a GPU, bfloat16 on a
CPU with AVX512-BF16/AMX, else float32).

`precision` is another thing: what `encode` returns (float32, int8, uint8,
binary or ubinary embeddings, as in sentence-transformers;
`sbert_keras.retrieval.quantization`). `set_precision`, this function's name
in earlier releases, still sets the compute path, with a `DeprecationWarning`.

Keras has no such vocabulary (its policies name variable and compute dtypes
together), so this thin mapping is written here.

Example:
```python
from sbert_keras.model.precision import set_compute

set_compute("bfloat16")  # Keras policy "mixed_bfloat16"; returns "bfloat16"
```
"""

import warnings

import keras

from sbert_keras.utils.defaults import COMPUTES
from sbert_keras.utils.defaults import DEPRECATED_POLICY_NAMES
from sbert_keras.utils.defaults import POLICIES
from sbert_keras.utils.defaults import POLICY_COMPUTES
from sbert_keras.utils.hardware import auto_precision


def compute_word(value, name="compute", allowed=COMPUTES):
    """`value` as a word of the compute vocabulary.

    Args:
        value: str or None. A word of `allowed` (`None` is `"auto"`), or a
            deprecated Keras policy name (`"mixed_bfloat16"`), which warns.
        name: str. The argument's name, for the messages.
        allowed: tuple of str. The words accepted here.

    Returns:
        The word (`"auto"` is returned as is).

    Raises:
        ValueError: `value` is not in `allowed`; the message names `name`.

    Example:
    ```python
    compute_word("float16")  # "float16"
    ```
    """
    if value is None:
        value = "auto"
    if isinstance(value, str) and value in DEPRECATED_POLICY_NAMES:
        word = DEPRECATED_POLICY_NAMES[value]
        warnings.warn(
            f"`{name}={value!r}` is a Keras dtype policy name; use `{name}={word!r}` "
            f"(sbert_keras names compute paths with {COMPUTES}).",
            DeprecationWarning,
            stacklevel=3,
        )
        value = word
    if value not in allowed:
        raise ValueError(f"`{name}` must be one of {allowed}. Received {value!r}.")
    return value


def policy_for(compute, name="compute"):
    """The Keras dtype policy name of a compute word; `"auto"` by hardware.

    Args:
        compute: str or None. See `compute_word`; `"int8"` has no policy.
        name: str. The argument's name, for the messages.

    Example:
    ```python
    policy_for("bfloat16")  # "mixed_bfloat16"
    ```
    """
    word = compute_word(compute, name, POLICY_COMPUTES)
    return POLICIES[auto_precision() if word == "auto" else word]


def set_compute(compute="auto"):
    """Sets the global Keras dtype policy for a compute word.

    Call it before building the encoder. The sentence embeddings,
    similarities and losses stay float32 whatever the compute path; only the
    backbone's matmuls run lower.

    Args:
        compute: str. `"auto"` (default: by hardware), `"float32"`,
            `"bfloat16"` or `"float16"`. The Keras names `"mixed_bfloat16"` /
            `"mixed_float16"` still work, with a `DeprecationWarning`.

    Returns:
        The compute word set (`"auto"` resolved), e.g. `"bfloat16"`.

    Raises:
        ValueError: an unknown compute word (e.g. `"int8"`, inference only).

    Example:
    ```python
    set_compute("auto")  # "bfloat16" on an AVX512-BF16 CPU, else "float32"
    ```
    """
    word = compute_word(compute, "compute", POLICY_COMPUTES)
    word = auto_precision() if word == "auto" else word
    keras.config.set_dtype_policy(POLICIES[word])
    return word


def set_precision(precision="auto"):
    """`set_compute` under its earlier name, with a `DeprecationWarning`.

    Args:
        precision: str. A compute word, as `set_compute` takes.

    Example:
    ```python
    set_precision("float32")  # as set_compute("float32")
    ```
    """
    warnings.warn(
        "`set_precision` is now `set_compute` (`precision` names the output embeddings' quantization).",
        DeprecationWarning,
        stacklevel=2,
    )
    return set_compute(precision)
