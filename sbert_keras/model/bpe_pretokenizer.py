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

Example:
```python
pretokenize(tf.constant(["Hello  world!"]))  # [[b"Hello", b" ", b" world", b"!"]]
```
"""

import tensorflow as tf
import tensorflow_text as tf_text

# Unicode's White_Space property: Oniguruma's `\s` and Rust's `char::is_whitespace`.
WHITESPACE = r"\t\n\x{0B}\f\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}"
WHITESPACE_RUN = rf"[{WHITESPACE}]+"
CHUNK_PATTERN = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+" + rf"| ?[^{WHITESPACE}\p{{L}}\p{{N}}]+|[{WHITESPACE}]+"


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
    return tf.RaggedTensor.from_value_rowids(
        tf.boolean_mask(pairs, keep), tf.boolean_mask(rows, keep), nrows=runs.nrows()
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
    return tf.RaggedTensor.from_row_splits(words.flat_values, tf.gather(words.row_splits, chunks.row_splits))
