"""GPT-2's byte-level pre-tokenizer in TensorFlow ops, split as Hugging Face's `ByteLevel` splits.

Hugging Face's `ByteLevel` pre-tokenizer (RoBERTa, GPT-2) cuts a text into
words with the regular expression

    's|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+

run by Oniguruma, where `\\s` is Unicode's White_Space property. TensorFlow's
regular expressions are RE2's: `\\s` there is ASCII-only and there is no
look-ahead. KerasHub's `BytePairTokenizer` emulates the look-ahead by
inserting a marker character (`६`, a Devanagari digit), which changes the
words of texts that hold that character, and lists only four of the
non-ASCII spaces. This module writes `\\s` out as the White_Space set and
replaces the look-ahead by an exact two-step split:

1. The text is cut into runs of whitespace and runs of anything else.
2. What `\\s+(?!\\S)` does is then local: a whitespace run followed by more
   text is one word without its last character, and that last character
   starts the next chunk (" word", "\\nword"); a run at the end of the text
   is one word. Each chunk is then split with the regular expression above,
   whose last branch is a plain `\\s+` (inside a chunk no whitespace run is
   followed by another run's text).

RE2's Unicode tables are older than Oniguruma's in `tokenizers`: the
letters and digits added since (Unicode 16) are listed, found by comparing
the two on every code point.

Example:
```python
pretokenize(tf.constant(["Hello  world!"]))  # [[b"Hello", b" ", b" world", b"!"]]
```
"""

from sbert_keras.utils.backends import tensorflow as tf
from sbert_keras.utils.backends import tensorflow_text as tf_text

# Unicode's White_Space property: Oniguruma's `\s` and Rust's `char::is_whitespace`.
WHITESPACE = r"\t\n\x{0B}\f\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}"
WHITESPACE_RUN = rf"[{WHITESPACE}]+"
# Letters and digits of Unicode 16 that Oniguruma (in `tokenizers` 0.23) knows and TensorFlow's RE2 does not.
NEW_LETTERS = (
    r"\x{1C89}-\x{1C8A}\x{A7CB}-\x{A7CD}\x{A7DA}-\x{A7DC}\x{105C0}-\x{105F3}\x{10D4A}-\x{10D65}"
    r"\x{10D6F}-\x{10D85}\x{10EC2}-\x{10EC4}\x{11380}-\x{11389}\x{1138B}\x{1138E}\x{11390}-\x{113B5}"
    r"\x{113B7}\x{113D1}\x{113D3}\x{11BC0}-\x{11BE0}\x{13460}-\x{143FA}\x{16100}-\x{1611D}"
    r"\x{16D40}-\x{16D6C}\x{18CFF}\x{1E5D0}-\x{1E5ED}\x{1E5F0}\x{2EBF0}-\x{2EE5D}"
)
NEW_DIGITS = (
    r"\x{10D40}-\x{10D49}\x{116D0}-\x{116E3}\x{11BF0}-\x{11BF9}\x{16130}-\x{16139}\x{16D70}-\x{16D79}"
    r"\x{1CCF0}-\x{1CCF9}\x{1E5F1}-\x{1E5FA}"
)
LETTERS = rf"\p{{L}}{NEW_LETTERS}"
DIGITS = rf"\p{{N}}{NEW_DIGITS}"
CHUNK_PATTERN = (
    r"'s|'t|'re|'ve|'m|'ll|'d" + rf"| ?[{LETTERS}]+| ?[{DIGITS}]+| ?[^{WHITESPACE}{LETTERS}{DIGITS}]+|[{WHITESPACE}]+"
)


def _chunks(texts):
    """Step 1 and 2: ragged `(n, None)` chunks, each split alone by `CHUNK_PATTERN`."""
    runs = tf_text.regex_split(texts, WHITESPACE_RUN, WHITESPACE_RUN)
    values = runs.flat_values
    is_space = tf.strings.regex_full_match(values, WHITESPACE_RUN)
    count = tf.size(values)
    position = tf.range(count, dtype=tf.int64)
    row_ends = tf.gather(runs.row_splits[1:], runs.value_rowids())
    followed = position + 1 < row_ends  # another run of the same text comes next
    chars = tf.strings.length(values, unit="UTF8_CHAR")
    split_last = is_space & followed
    head = tf.where(split_last, tf.strings.substr(values, tf.zeros_like(chars), chars - 1, unit="UTF8_CHAR"), values)
    head = tf.where(is_space, head, "")
    last = tf.where(split_last, tf.strings.substr(values, chars - 1, tf.ones_like(chars), unit="UTF8_CHAR"), "")
    carried = tf.concat([[""], last[:-1]], axis=0)[:count]
    starts_row = tf.equal(position, tf.gather(runs.row_splits[:-1], runs.value_rowids()))
    carried = tf.where(starts_row, "", carried)
    body = tf.where(is_space, "", tf.strings.join([carried, values]))
    pairs = tf.reshape(tf.stack([head, body], axis=1), [-1])
    keep = tf.strings.length(pairs) > 0
    rows = tf.reshape(tf.stack([runs.value_rowids()] * 2, axis=1), [-1])
    # Valid by construction: no validation ops (`added_tokens`' module docstring).
    return tf.RaggedTensor.from_value_rowids(
        tf.boolean_mask(pairs, keep), tf.boolean_mask(rows, keep), nrows=runs.nrows(), validate=False
    )


def pretokenize(texts):
    """Strings `(n,)` -> their byte-level BPE words, ragged `(n, None)`, as Hugging Face's `ByteLevel`.

    Args:
        texts: a 1-D string tensor.

    Returns:
        a `tf.RaggedTensor` of strings.
    """
    chunks = _chunks(texts)
    words = tf_text.regex_split(chunks.flat_values, CHUNK_PATTERN, CHUNK_PATTERN)
    return tf.RaggedTensor.from_row_splits(
        words.flat_values, tf.gather(words.row_splits, chunks.row_splits), validate=False
    )
