"""One precision vocabulary for inference and training.

Users name a precision with the words of `defaults.PRECISIONS`: `"auto"`,
`"float32"`, `"bfloat16"`, `"float16"` (and `"int8"`, for `encode` and the
export only). `encode(precision=...)`, `set_precision`, `sbert-keras train
--precision`, `SentenceEncoder.from_preset(dtype=...)` and the benchmarks all
take these words. Where a Keras graph runs at that precision (training, the
backbone built by `from_preset`), the word maps to the Keras dtype policy of
`defaults.POLICIES` (`"bfloat16"` -> `"mixed_bfloat16"`): float32 variables,
low-precision matmuls, pooling and losses float32. Keras' policy names
(`"mixed_bfloat16"`, `"mixed_float16"`) are still accepted, with a
`DeprecationWarning` naming the new word. `"auto"` follows the hardware with
the one rule of `sbert_keras.utils.hardware.auto_precision` (float16 on a GPU, bfloat16 on a
CPU with AVX512-BF16/AMX, else float32).

Keras has no such vocabulary (its policies name variable and compute dtypes
together), so this thin mapping is written here.

Example:
```python
from sbert_keras.model.precision import set_precision

set_precision("bfloat16")  # Keras policy "mixed_bfloat16"; returns "bfloat16"
```
"""

import warnings

import keras

from sbert_keras.utils.defaults import DEPRECATED_POLICY_NAMES
from sbert_keras.utils.defaults import POLICIES
from sbert_keras.utils.defaults import POLICY_PRECISIONS
from sbert_keras.utils.defaults import PRECISIONS
from sbert_keras.utils.hardware import auto_precision


def precision_word(value, name="precision", allowed=PRECISIONS):
    """`value` as a word of the precision vocabulary.

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
    precision_word("float16")  # "float16"
    ```
    """
    if value is None:
        value = "auto"
    if isinstance(value, str) and value in DEPRECATED_POLICY_NAMES:
        word = DEPRECATED_POLICY_NAMES[value]
        warnings.warn(
            f"`{name}={value!r}` is a Keras dtype policy name; use `{name}={word!r}` "
            f"(sbert_keras names precisions with {PRECISIONS}).",
            DeprecationWarning,
            stacklevel=3,
        )
        value = word
    if value not in allowed:
        raise ValueError(f"`{name}` must be one of {allowed}. Received {value!r}.")
    return value


def policy_for(precision, name="precision"):
    """The Keras dtype policy name of a precision word; `"auto"` by hardware.

    Args:
        precision: str or None. See `precision_word`; `"int8"` has no policy.
        name: str. The argument's name, for the messages.

    Example:
    ```python
    policy_for("bfloat16")  # "mixed_bfloat16"
    ```
    """
    word = precision_word(precision, name, POLICY_PRECISIONS)
    return POLICIES[auto_precision() if word == "auto" else word]


def set_precision(precision="auto"):
    """Sets the global Keras dtype policy for a precision word.

    Call it before building the encoder. The sentence embeddings,
    similarities and losses stay float32 whatever the precision; only the
    backbone's matmuls run lower.

    Args:
        precision: str. `"auto"` (default: by hardware), `"float32"`,
            `"bfloat16"` or `"float16"`. The Keras names `"mixed_bfloat16"` /
            `"mixed_float16"` still work, with a `DeprecationWarning`.

    Returns:
        The precision word set (`"auto"` resolved), e.g. `"bfloat16"`.

    Raises:
        ValueError: an unknown precision (e.g. `"int8"`, inference only).

    Example:
    ```python
    set_precision("auto")  # "bfloat16" on an AVX512-BF16 CPU, else "float32"
    ```
    """
    word = precision_word(precision, "precision", POLICY_PRECISIONS)
    word = auto_precision() if word == "auto" else word
    keras.config.set_dtype_policy(POLICIES[word])
    return word
