"""RoBERTa's byte-level BPE tokenizer with Hugging Face's token ids, in TensorFlow ops.

KerasHub's `RobertaTokenizer` differs from Hugging Face's `tokenizers` on
some texts (its pre-tokenizer knows four of Unicode's non-ASCII spaces and
marks look-aheads with a real character) and merges in n^2 steps for a word
of n bytes. `ByteLevelBPETokenizer` keeps KerasHub's class, vocabulary,
special tokens and saved assets, and replaces `tokenize`: the words of
`model.bpe_pretokenizer`, their bytes as token ids, and the merges of
`model.bpe_merges`. Everything is TensorFlow ops, so `tf.data` pipelines
and SavedModels tokenise the same way.

`cut_texts` makes the cost of a long text bounded by what is kept: a token
covers at most `longest_token` bytes, so the first `k` tokens of a text lie
in its first `k * longest_token` bytes. Text past twice that is cut: the
second half is a margin for the one word the cut splits, whose first
tokens could change only through a chain of merges, each ranked before the
one on its left, reaching back over `k * longest_token` bytes (none occurs
in the tests' long runs, checked against `tokenizers`). The preprocessor
cuts before tokenising and reports the text as truncated, as it does for
every text with more tokens than it keeps.

Example:
```python
tokenizer = ByteLevelBPETokenizer(vocabulary={...}, merges=["a b", ...])
tokenizer(["Hello world"])
```
"""

import keras
import keras_hub

from sbert_keras.model.bpe_merges import merge_table
from sbert_keras.model.bpe_merges import merge_words
from sbert_keras.model.bpe_pretokenizer import pretokenize
from sbert_keras.model.host_tokenizer import runs_on_host
from sbert_keras.model.host_tokenizer import tokenize_on_host
from sbert_keras.utils import backends
from sbert_keras.utils.backends import tensorflow as tf


def byte_characters():
    """GPT-2's map from each byte (0..255) to the printable character standing for it."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    others = [b for b in range(256) if b not in printable]
    table = dict(zip(printable, printable)) | {b: 256 + i for i, b in enumerate(others)}
    return [chr(table[b]) for b in range(256)]


@keras.saving.register_keras_serializable(package="sbert_keras")
class ByteLevelBPETokenizer(keras_hub.models.RobertaTokenizer):
    """`RobertaTokenizer` whose ids are those of Hugging Face's byte-level BPE, in linear time.

    Args:
        vocabulary: dict `{token: id}` or a `vocab.json` path.
        merges: list of `"a b"` strings or a `merges.txt` path.
        add_prefix_space: bool. Prepend a space to a text that does not
            start with one (Hugging Face's `ByteLevel(add_prefix_space=True)`).
        **kwargs: passed to `keras_hub.models.RobertaTokenizer`.

    Example:
    ```python
    tokenizer = ByteLevelBPETokenizer(vocabulary=vocab, merges=merges)
    tokenizer(["The weather is nice today."])
    ```
    """

    def set_vocabulary_and_merges(self, vocabulary, merges):
        """Sets the vocabulary and merges (see KerasHub) and the id tables of `tokenize`.

        The tables are TensorFlow lookup tables: built here on TensorFlow (a
        `tf.data` pipeline cannot build them), on first use elsewhere.
        """
        super().set_vocabulary_and_merges(vocabulary, merges)
        self._tables = None
        if self.vocabulary is None:
            return
        characters = byte_characters()
        # A byte missing from the vocabulary is dropped before merging, as Hugging Face's BPE without
        # `unk_token` (RoBERTa's) drops it.
        self.drops_bytes = any(c not in self.vocabulary for c in characters)
        self.merge_keys, self.merge_values = merge_table(self.vocabulary, [str(m) for m in self.merges])
        self.longest_token = max(len(token) for token in self.vocabulary)
        if backends.uses_tensorflow():
            self.lookup_tables()

    def lookup_tables(self):
        """`(byte ids, merges)`: the `tf.lookup.StaticHashTable`s of `tokenize`, built on first use."""
        if getattr(self, "_tables", None) is None:
            characters = byte_characters()
            byte_ids = tf.lookup.StaticHashTable(
                tf.lookup.KeyValueTensorInitializer(
                    tf.constant([bytes([b]) for b in range(256)]),
                    tf.constant([self.vocabulary.get(c, -1) for c in characters], tf.int64),
                ),
                default_value=-1,
            )
            merges = tf.lookup.StaticHashTable(
                tf.lookup.KeyValueTensorInitializer(
                    tf.constant(self.merge_keys, tf.int64), tf.constant(self.merge_values, tf.int64)
                ),
                default_value=-1,
            )
            self._tables = (byte_ids, merges)
        return self._tables

    def cut_texts(self, texts, max_tokens):
        """Graph-safe: each text cut to what its first `max_tokens` tokens can depend on.

        Args:
            texts: a 1-D string tensor.
            max_tokens: int. The number of tokens that will be kept.

        Returns:
            `(texts, cut)`: the texts, and a bool tensor telling which were cut.
        """
        keep = 2 * max(int(max_tokens), 1) * self.longest_token
        cut = tf.strings.length(texts, unit="UTF8_CHAR") > keep
        return tf.strings.substr(texts, 0, keep, unit="UTF8_CHAR"), cut

    def tokenize(self, inputs):
        """Strings -> token ids: a ragged `(n, None)` int tensor, or 1-D for one string (lists on the host)."""
        if runs_on_host(inputs):  # JAX, PyTorch: `tokenizers` itself
            return tokenize_on_host(self, inputs)
        inputs = tf.convert_to_tensor(inputs, tf.string)
        scalar = inputs.shape.rank == 0
        texts = tf.reshape(inputs, [-1])
        if self.add_prefix_space:
            starts = tf.strings.substr(texts, 0, 1)
            texts = tf.where((starts == " ") | (texts == ""), texts, tf.strings.join([" ", texts]))
        # TensorFlow Text's splits end a text at a NUL byte: the words are found in a copy where NUL is
        # \x01 (the same class: neither space, letter nor digit), and cut from the text's own bytes.
        byte_ids, merge_lookup = self.lookup_tables()
        words = pretokenize(tf.strings.regex_replace(texts, r"\x00", "\x01"))
        text_bytes = tf.strings.bytes_split(texts).flat_values
        word_bytes = tf.RaggedTensor.from_row_lengths(
            byte_ids.lookup(text_bytes), tf.cast(tf.strings.length(words.flat_values), tf.int64)
        )
        if self.drops_bytes:
            word_bytes = tf.ragged.boolean_mask(word_bytes, word_bytes >= 0)
        merged = merge_words(merge_lookup, len(self.vocabulary), word_bytes)
        # Valid by construction: no validation ops (`added_tokens`' module docstring).
        ids = tf.RaggedTensor.from_row_splits(
            tf.cast(merged.flat_values, self.compute_dtype),
            tf.gather(merged.row_splits, words.row_splits),
            validate=False,
        )
        return ids[0] if scalar else ids
