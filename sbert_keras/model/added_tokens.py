"""Added tokens (`<s>`, `</s>`, `<mask>`, `[CLS]`, ...) written inside a text, split out as Hugging Face does.

Hugging Face's `tokenizers` cuts the strings of `tokenizer.json`'s
`added_tokens` out of a text before its normaliser and model run, gives each
its own id, and tokenises the pieces between them on their own. KerasHub's
tokenizers do not (its BPE keeps only its four special tokens whole, through
a placeholder string), so this module does it for any tokenizer, in
TensorFlow ops: one regular expression of the tokens, longest first (Hugging
Face matches leftmost-longest), where a token with `lstrip` / `rstrip` also
takes the whitespace on its left / right.

Ragged tensors whose row partition is derived from their own values (one
row per piece, masks of one length, gathered row splits) are built with
`validate=False`: RaggedTensor's checks add some 60 graph ops per tensor,
which a tokenizer graph's first call traces and optimises, for partitions
that are valid by construction. Those taken from another op's output (the
byte lengths of split pieces, here and in `bpe_tokenizer`) keep them.

Example:
```python
tokens = [{"content": "<mask>", "id": 4, "lstrip": True, "rstrip": False}]
ids = tokenize_with_added_tokens(tokenizer, tf.constant(["a <mask> b"]), tokens)
```
"""

import re

from sbert_keras.model.bpe_pretokenizer import WHITESPACE
from sbert_keras.utils.backends import tensorflow as tf
from sbert_keras.utils.backends import tensorflow_text as tf_text


def _regex(token):
    """The RE2 expression of one token: its text, with the whitespace it strips."""
    body = "".join(f"\\x{{{ord(c):X}}}" if not c.isalnum() else re.escape(c) for c in token["content"])
    left = f"[{WHITESPACE}]*" if token.get("lstrip") else ""
    right = f"[{WHITESPACE}]*" if token.get("rstrip") else ""
    return left + body + right


def added_token_pattern(added_tokens):
    """One RE2 expression matching any added token, the longest first."""
    ordered = sorted(added_tokens, key=lambda t: -len(t["content"]))
    return "|".join(_regex(t) for t in ordered)


def split_added_tokens(texts, added_tokens, normalize=None):
    """Strings `(n,)` -> `(pieces, ids)`: ragged `(n, None)` pieces, and each piece's token id (-1 for text).

    As `tokenizers` does, tokens without `normalized` are cut out of the raw
    text first; the text between them is then normalised and the
    `normalized` tokens are cut out of that (its pieces come back
    normalised: normalising them again changes nothing).

    Args:
        texts: a 1-D string tensor.
        added_tokens: list of dicts with `content`, `id`, `lstrip`, `rstrip`
            and optionally `normalized`.
        normalize: callable on a 1-D string tensor, the tokenizer's
            normaliser; required when a token is `normalized`.
    """
    raw = [t for t in added_tokens if not t.get("normalized")]
    normalized = [t for t in added_tokens if t.get("normalized")]
    if normalized and normalize is None:
        raise ValueError(f"added tokens matched on normalised text ({normalized[0]['content']!r}) need a normaliser.")
    if raw:
        pieces, ids = _split(texts, raw)
    else:
        pieces = tf.RaggedTensor.from_row_lengths(
            texts, tf.ones(tf.shape(texts, out_type=tf.int64), tf.int64), validate=False
        )
        ids = tf.fill(tf.shape(texts), tf.constant(-1, tf.int64))
    return _split_normalized(pieces, ids, normalized, normalize) if normalized else (pieces, ids)


def _split_normalized(pieces, ids, tokens, normalize):
    """`(pieces, ids)` with each text piece normalised and cut at `tokens`; token pieces stay whole."""
    flat, is_text = pieces.flat_values, ids < 0
    text_pieces = tf.boolean_mask(flat, is_text)
    sub_pieces, sub_ids = _split(normalize(text_pieces), tokens)
    single = tf.ones([tf.reduce_sum(tf.cast(~is_text, tf.int64))], tf.int64)
    token_pieces = tf.RaggedTensor.from_row_lengths(tf.boolean_mask(flat, ~is_text), single, validate=False)
    token_ids = tf.RaggedTensor.from_row_lengths(tf.boolean_mask(ids, ~is_text), single, validate=False)
    by_piece = _in_text_order(sub_pieces.with_row_splits_dtype(tf.int64), token_pieces, is_text)
    by_piece_ids = _in_text_order(
        sub_pieces.with_row_splits_dtype(tf.int64).with_flat_values(sub_ids), token_ids, is_text
    )
    rows = tf.gather(by_piece.row_splits, pieces.row_splits)
    return tf.RaggedTensor.from_row_splits(by_piece.flat_values, rows, validate=False), by_piece_ids.flat_values


def _in_text_order(text_rows, token_rows, is_text):
    """One ragged row per piece, in text order: the next of `text_rows` where `is_text`, else of `token_rows`."""
    position = tf.cumsum(tf.cast(is_text, tf.int64), exclusive=True)
    other = text_rows.nrows(out_type=tf.int64) + tf.cumsum(tf.cast(~is_text, tf.int64), exclusive=True)
    return tf.gather(tf.concat([text_rows, token_rows], axis=0), tf.where(is_text, position, other))


def _split(texts, added_tokens):
    """`split_added_tokens` of `added_tokens` (all matched on `texts` as they are)."""
    pattern = added_token_pattern(added_tokens)
    # A NUL byte ends a text for TensorFlow Text's splits; \x01 stands in for it (no token holds either).
    escaped = tf.strings.regex_replace(texts, r"\x00", "\x01")
    _, starts, ends = tf_text.regex_split_with_offsets(escaped, pattern, pattern)
    rows = starts.value_rowids()
    # The pieces cover each text in order: they are cut from its own bytes (NUL included).
    text_bytes = tf.strings.bytes_split(texts).flat_values
    lengths = tf.cast(ends.flat_values - starts.flat_values, tf.int64)
    pieces = tf.strings.reduce_join(tf.RaggedTensor.from_row_lengths(text_bytes, lengths), axis=1)
    is_token = tf.strings.regex_full_match(pieces, pattern)
    content = tf.strings.regex_replace(pieces, f"^[{WHITESPACE}]+|[{WHITESPACE}]+$", "")
    ids = tf.fill(tf.shape(pieces), tf.constant(-1, tf.int64))
    for token in added_tokens:  # a few tokens: no lookup table, which a traced function could not own
        ids = tf.where(is_token & tf.equal(content, token["content"]), tf.constant(token["id"], tf.int64), ids)
    return tf.RaggedTensor.from_value_rowids(
        pieces, rows, nrows=tf.shape(texts, out_type=tf.int64)[0], validate=False
    ), ids


def tokenize_with_added_tokens(tokenizer, texts, added_tokens, cut=None):
    """Graph-safe: strings `(n,)` -> ragged `(n, None)` int32 ids, added tokens given their own ids.

    Args:
        tokenizer: a callable from a 1-D string tensor to ragged ids.
        texts: a 1-D string tensor.
        added_tokens: list of dicts with `content`, `id`, `lstrip`, `rstrip`
            and optionally `normalized` (matched on the text as the
            tokenizer's `normalize_texts` normalises it); empty: `tokenizer(texts)`.
        cut: None, or a callable cutting a 1-D string tensor before the
            tokenizer sees it (`ByteLevelBPETokenizer.cut_texts`).
    """
    if not added_tokens:
        return _as_ragged(tokenizer(cut(texts) if cut else texts))
    pieces, ids = split_added_tokens(texts, added_tokens, getattr(tokenizer, "normalize_texts", None))
    is_text = ids < 0
    text_pieces = tf.boolean_mask(pieces.flat_values, is_text)
    text_ids = tf.cast(_as_ragged(tokenizer(cut(text_pieces) if cut else text_pieces)), tf.int64)
    text_ids = text_ids.with_row_splits_dtype(tf.int64)
    token_rows = tf.RaggedTensor.from_row_lengths(
        tf.boolean_mask(ids, ~is_text), tf.boolean_mask(tf.ones_like(ids), ~is_text), validate=False
    )
    by_piece = _in_text_order(text_ids, token_rows.with_row_splits_dtype(tf.int64), is_text)
    merged = tf.RaggedTensor.from_row_splits(
        by_piece.flat_values, tf.gather(by_piece.row_splits, pieces.row_splits), validate=False
    )
    return tf.cast(merged, tf.int32)


def _as_ragged(ids):
    if isinstance(ids, (list, tuple)):  # eager KerasHub returns Python lists
        return tf.ragged.constant(ids, dtype=tf.int32, ragged_rank=1)
    if not isinstance(ids, tf.RaggedTensor):
        return tf.RaggedTensor.from_tensor(ids)
    return ids
