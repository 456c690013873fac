"""Hugging Face's BERT WordPiece tokenisation in the TensorFlow graph, token for token.

sentence-transformers tokenises BERT, DistilBERT and MPNet checkpoints with
the `tokenizers` library: `BertNormalizer` (clean the text, pad CJK
characters with spaces, strip accents, lowercase), `BertPreTokenizer`
(split at white space, isolate punctuation) and `WordPiece` (a word of more
than `max_input_chars_per_word` characters is one unknown token). KerasHub's
`WordPieceTokenizer` differs in each step: it splits at control characters
instead of deleting them, keeps the no-break space inside a word, case-folds
("ß" -> "ss") instead of lowercasing, uses RE2's and ICU's Unicode versions
instead of the older tables of `tokenizers`, and counts a word's length in
bytes. The mixin below replaces its `tokenize` with the steps of
`tokenizers`, run as TensorFlow ops so that it works in `tf.data` and in a
SavedModel (no `py_function`):

1. `clean_text`: one `regex_replace` deletes the characters `tokenizers`
   deletes, another turns its white space into spaces;
2. `handle_chinese_chars`: a `regex_replace` pads CJK characters;
3. `strip_accents` and `lowercase`: one per-character mapping
   (`unicode_classes.char_map`), applied to the code points with a sorted
   key table (`searchsorted`) and a ragged gather;
4. split at white space, each punctuation character a word of its own
   (`regex_replace` and `tf.strings.split`);
5. words over `max_input_chars_per_word` code points (or with a NUL, which
   no vocabulary holds) become the unknown token, then tf.text's
   `FastWordpieceTokenizer` (greedy longest match first, as `tokenizers`)
   gives the ids.

Every character class and mapping comes from tables read from
`tokenizers` itself (`unicode_derivation`), which is why the steps are
written out here instead of calling tf.text's or ICU's Unicode functions.

Example:
```python
tokenizer = LowercasingBertTokenizer(vocabulary="vocab.txt", lowercase=True)  # checkpoints.tokenizer_json
tokenizer(["The weather is\\xa0nice today."])
```
"""

import numpy as np

from sbert_keras.compat.keras_hub import preprocessing_function
from sbert_keras.model.host_tokenizer import runs_on_host
from sbert_keras.model.host_tokenizer import tokenize_on_host
from sbert_keras.model.unicode_classes import char_map_arrays
from sbert_keras.model.unicode_classes import patterns
from sbert_keras.model.unicode_classes import white_space_after_cleaning
from sbert_keras.utils import backends
from sbert_keras.utils.backends import tensorflow as tf
from sbert_keras.utils.backends import tensorflow_text as tf_text

# tf.text measures a word in bytes; a code point takes at most four.
MAX_BYTES_PER_CHARACTER = 4


def _map_code_points(texts, ascii_table, keys, starts, lengths, values):
    """`map_characters` on a 1-D string tensor, code point by code point."""
    chars = tf.strings.unicode_decode(texts, "UTF-8")
    codes = chars.flat_values
    codes = tf.where(codes < 128, tf.gather(tf.constant(ascii_table), tf.minimum(codes, 127)), codes)
    others = tf.where(codes >= 128)[:, 0]
    other_codes = tf.gather(codes, others)
    table_keys = tf.constant(keys)
    position = tf.minimum(tf.searchsorted(table_keys, other_codes), keys.size - 1)
    found = tf.gather(table_keys, position) == other_codes
    mapped = tf.boolean_mask(others, found)[:, None]
    position = tf.boolean_mask(position, found)
    size = tf.shape(codes, out_type=tf.int64)[:1]
    length = tf.tensor_scatter_nd_update(tf.ones(size, tf.int64), mapped, tf.gather(tf.constant(lengths), position))
    start = tf.tensor_scatter_nd_update(tf.fill(size, tf.constant(-1, tf.int64)), mapped, tf.gather(starts, position))
    ends = tf.cumsum(length)
    source = tf.repeat(tf.range(size[0]), length)
    offset = tf.range(tf.reduce_sum(length)) - tf.gather(ends - length, source)
    start = tf.gather(start, source)
    value = tf.gather(tf.constant(values), tf.maximum(start, 0) + offset)
    out = tf.where(start >= 0, value, tf.gather(codes, source))
    splits = tf.gather(tf.concat([tf.zeros([1], tf.int64), ends], 0), chars.row_splits)
    # Valid by construction: no validation ops (`added_tokens`' module docstring).
    return tf.strings.unicode_encode(tf.RaggedTensor.from_row_splits(out, splits, validate=False), "UTF-8")


def map_characters(texts, strip_accents, lowercase):
    """Strips accents and lowercases `texts` (a string tensor of any shape) with `unicode_classes.char_map`.

    Each code point becomes the code points of its mapping, or stays, with
    dense ops: ASCII through a 128-entry table, the others through a sorted
    key table (`searchsorted`); every output code point is then gathered
    from its source character (`repeat`) and its offset in the mapping.
    Texts that are all ASCII (most, in English) take `tf.strings.lower`
    instead, which lowercases exactly `A`-`Z`.
    """
    ascii_table, keys, starts, lengths, values = char_map_arrays(bool(strip_accents), bool(lowercase))
    identity = np.arange(128, dtype=np.int32)
    if not keys.size and (ascii_table == identity).all():
        return texts
    ascii_lower = np.where((identity >= 65) & (identity <= 90), identity + 32, identity)
    if not keys.size or not ((ascii_table == identity).all() or (ascii_table == ascii_lower).all()):
        raise ValueError("unicode_tables: expected non-ASCII mappings and, for ASCII, at most A-Z -> a-z.")
    shape = tf.shape(texts)
    texts = tf.reshape(texts, [-1])
    is_ascii = tf.strings.length(texts) == tf.strings.length(texts, unit="UTF8_CHAR")
    plain = tf.where(is_ascii)[:, 0]
    other = tf.where(~is_ascii)[:, 0]
    ascii_texts = tf.gather(texts, plain)
    if (ascii_table == ascii_lower).all():
        ascii_texts = tf.strings.lower(ascii_texts)
    mapped = _map_code_points(tf.gather(texts, other), ascii_table, keys, starts, lengths, values)
    indices = [tf.cast(plain, tf.int32), tf.cast(other, tf.int32)]
    return tf.reshape(tf.dynamic_stitch(indices, [ascii_texts, mapped]), shape)


def normalize(texts, lowercase, strip_accents, clean_text=True, handle_chinese_chars=True):
    """`BertNormalizer` of `tokenizers` on a string tensor, in the graph.

    Args:
        texts: string tensor of any shape.
        lowercase: bool. Lowercase (Rust's `char::to_lowercase`).
        strip_accents: bool. NFD, then drop the combining marks.
        clean_text: bool. Delete control and format characters, turn white
            space into spaces.
        handle_chinese_chars: bool. Put spaces around CJK characters.

    Returns:
        the normalised strings, same shape.
    """
    classes = patterns()
    if clean_text:
        texts = tf.strings.regex_replace(texts, classes["deleted"], "")
        texts = tf.strings.regex_replace(texts, classes["spaces"], " ")
    if handle_chinese_chars:
        texts = tf.strings.regex_replace(texts, classes["chinese"], r" \0 ")
    return map_characters(texts, strip_accents, lowercase)


def split_words(texts, spaces_only=False):
    """`BertPreTokenizer` in the graph: split at white space, each punctuation character a word of its own.

    Spaces go around each punctuation character, then `tf.strings.split`
    cuts at spaces (tf.text's `regex_split` would end a text at a NUL).

    Args:
        texts: string tensor of any shape.
        spaces_only: bool. The only white space in `texts` is the space
            (`clean_text` turned the rest into spaces), so the other white
            space characters need not be looked for.

    Returns:
        a RaggedTensor of words, one more ragged dimension than `texts`.
    """
    classes = patterns()
    if not spaces_only:
        texts = tf.strings.regex_replace(texts, classes["whitespace"], " ")
    texts = tf.strings.regex_replace(texts, classes["punctuation"], r" \0 ")
    words = tf.strings.split(texts, sep=" ")
    return tf.ragged.boolean_mask(words, tf.strings.length(words) > 0)


class HuggingFaceWordPiece:
    """Mixin for a KerasHub `WordPieceTokenizer`: tokenise as Hugging Face's `tokenizers` does.

    The class it is mixed into takes these arguments and sets them with
    `set_normalizer_options` before calling KerasHub's `__init__` (which
    sets the vocabulary). `lowercase` and `strip_accents` keep their KerasHub
    meaning as options, applied here the way `tokenizers` applies them.
    KerasHub's other modes (`split=False` for pre-split words,
    `special_tokens_in_strings=True`) run KerasHub's own tokenisation.

    Args:
        clean_text: bool. `BertNormalizer`'s `clean_text`.
        handle_chinese_chars: bool. `BertNormalizer`'s `handle_chinese_chars`.
        max_input_chars_per_word: int. WordPiece's longest word, in code points.
    """

    def set_normalizer_options(self, clean_text, handle_chinese_chars, max_input_chars_per_word):
        self.clean_text = bool(clean_text)
        self.handle_chinese_chars = bool(handle_chinese_chars)
        self.max_input_chars_per_word = int(max_input_chars_per_word)

    @property
    def lowercase_like_python(self):
        """bool. Whether the tokenizer lowercases (the name of earlier releases)."""
        return bool(self.lowercase)

    def set_vocabulary(self, vocabulary):
        super().set_vocabulary(vocabulary)
        self._word_pieces = None
        # tf.data needs the tf.text tokenizer built outside its pipeline: eagerly on TensorFlow, on first use (never,
        # on the host path of JAX and PyTorch) elsewhere.
        if self.vocabulary is not None and backends.uses_tensorflow():
            self.word_pieces()

    def word_pieces(self):
        """tf.text's `FastWordpieceTokenizer` of the vocabulary, built on first use (needs TensorFlow Text)."""
        if getattr(self, "_word_pieces", None) is None:
            self._check_vocabulary()
            self._word_pieces = tf_text.FastWordpieceTokenizer(
                vocab=self.vocabulary,
                token_out_type=self.compute_dtype,
                suffix_indicator=self.suffix_indicator,
                unknown_token=self.oov_token,
                max_bytes_per_word=MAX_BYTES_PER_CHARACTER * self.max_input_chars_per_word,
                no_pretokenization=True,
                support_detokenization=False,
            )
        return self._word_pieces

    def tokenize(self, inputs):
        self._check_vocabulary()
        if not self.split or self.special_tokens_in_strings:
            return super().tokenize(inputs)  # KerasHub's own modes: pre-split words, special tokens in text
        if runs_on_host(inputs):  # JAX, PyTorch: `tokenizers` itself
            return tokenize_on_host(self, inputs)
        return self._tokenize_like_tokenizers(inputs)

    def normalize_texts(self, texts):
        """This tokenizer's `BertNormalizer` on a string tensor (where normalised added tokens are matched)."""
        return normalize(texts, self.lowercase, self.strip_accents, self.clean_text, self.handle_chinese_chars)

    @preprocessing_function
    def _tokenize_like_tokenizers(self, inputs):
        if not isinstance(inputs, tf.RaggedTensor):
            inputs = tf.convert_to_tensor(inputs)
        unbatched = inputs.shape.rank == 0
        if unbatched:
            inputs = tf.expand_dims(inputs, 0)
        texts = self.normalize_texts(inputs)
        spaces_only = self.clean_text and not white_space_after_cleaning(bool(self.strip_accents), bool(self.lowercase))
        words = split_words(texts, spaces_only)
        flat = words.flat_values
        unknown = tf.strings.length(flat, unit="UTF8_CHAR") > self.max_input_chars_per_word
        if not self.clean_text:  # which deletes NUL; no vocabulary holds one (tf.text refuses it), so
            # `tokenizers` gives such a word its unknown token, where tf.text would end the word at the NUL.
            unknown |= tf.strings.regex_full_match(flat, "(?s).*\\x00.*")
        words = words.with_flat_values(tf.where(unknown, self.oov_token, flat))
        tokens = self.word_pieces().tokenize(words).merge_dims(-2, -1)
        if self.sequence_length:
            shape = tokens.shape.as_list()
            shape[-1] = self.sequence_length
            tokens = tokens.to_tensor(shape=shape)
        if unbatched:
            tokens = tf.squeeze(tokens, 0)
        return tokens

    def get_config(self):
        config = super().get_config()
        config.update(
            clean_text=self.clean_text,
            handle_chinese_chars=self.handle_chinese_chars,
            max_input_chars_per_word=self.max_input_chars_per_word,
        )
        return config
