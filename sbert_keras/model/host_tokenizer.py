"""Texts tokenised on the host by Hugging Face's `tokenizers`, with the ids of the in-graph tokenisers.

sentence-transformers tokenises with the `tokenizers` library; the
tokenisers of `wordpiece`, `bpe_tokenizer` and `sentencepiece_tokenizer`
reproduce it in TensorFlow ops, so that `tf.data` pipelines and SavedModels
tokenise inside the graph. On Keras' JAX and PyTorch backends there is no
TensorFlow graph (and maybe no TensorFlow): texts are tokenised on the host
by a `tokenizers.Tokenizer` instead, built from the Keras tokenizer's own
state (vocabulary, merges, normaliser options, SentencePiece model, added
tokens) as `model.tokenizer_pipeline` describes it, so a `.keras` file,
which holds no `tokenizer.json`, works too: the pipeline Hugging Face's
converters write into `tokenizer.json` for each family.

KerasHub's own `BertTokenizer` and `RobertaTokenizer` get the same pipeline:
what sentence-transformers would run, which their in-graph tokenisation
(case folding, older Unicode tables) can differ from on rare texts.

No post-processor, truncation or padding: the preprocessor adds the start and
end tokens and cuts (`HostTokenizing.host_token_ids`). Added tokens keep
their ids (`model.added_tokens`): where `tokenizers` numbers one otherwise
(its content sits at another id of the vocabulary, or is not in it), the id
is mapped. The tokenizers themselves call `tokenize_on_host` outside
TensorFlow, so `tokenizer(texts)` works there too.

Example:
```python
host, id_map = host_tokenizer(preprocessor.tokenizer, preprocessor.added_tokens)
host.encode("The weather is nice today.", add_special_tokens=False).ids
```
"""

import json

import numpy as np
import tokenizers

from sbert_keras.model.tokenizer_pipeline import tokenizer_json
from sbert_keras.utils import backends


def host_tokenizer(tokenizer, added_tokens=()):
    """A `tokenizers.Tokenizer` giving `tokenizer`'s ids, and the map of added-token ids it needs.

    Args:
        tokenizer: a KerasHub WordPiece tokenizer (`LowercasingBertTokenizer`,
            `MPNetTokenizer`, `BertTokenizer`), byte-level BPE
            (`ByteLevelBPETokenizer`, `RobertaTokenizer`) or
            `XLMRobertaTokenizer` (`SpaceSplittingXLMRobertaTokenizer`).
        added_tokens: list of dicts (`content`, `id`, `lstrip`, `rstrip`):
            the preprocessor's `added_tokens`.

    Returns:
        `(host, id_map)`: the `tokenizers.Tokenizer` (no post-processor,
        truncation or padding), and a dict from the ids it gives some added
        tokens to their ids (empty when none differ).

    Raises:
        TypeError: a tokenizer of another kind.
        ValueError: a tokenizer in a mode `tokenizers` has no equivalent of.

    Example:
    ```python
    host, id_map = host_tokenizer(preprocessor.tokenizer, preprocessor.added_tokens)
    host.encode("The weather is nice today.", add_special_tokens=False).ids
    ```
    """
    # The family's own special tokens and post-processor stay out: the preprocessor adds the start and end tokens,
    # and only the preprocessor's added tokens are split out of texts, as in the graph.
    spec = dict(tokenizer_json(tokenizer), added_tokens=[], post_processor=None)
    host = tokenizers.Tokenizer.from_str(json.dumps(spec))
    host.no_truncation()
    host.no_padding()
    tokens = [
        tokenizers.AddedToken(
            t["content"],
            lstrip=bool(t.get("lstrip")),
            rstrip=bool(t.get("rstrip")),
            normalized=bool(t.get("normalized")),
            special=True,
        )
        for t in added_tokens
    ]
    host.add_special_tokens(tokens)
    id_map = {}
    for token in added_tokens:
        given = host.token_to_id(token["content"])
        if given != token["id"]:
            id_map[given] = int(token["id"])
    return host, id_map


def pad_rows(rows, pad_id, length=None):
    """Rows of token ids -> one `(n, length)` `np.int32` array, each row padded with `pad_id` on the right.

    Args:
        rows: sequence of 1-D integer arrays or lists (e.g. `host_token_ids`'s).
        pad_id: int. The padding token's id.
        length: int or None. The padded length; `None`: the longest row.

    Raises:
        ValueError: a row longer than `length`.

    Example:
    ```python
    pad_rows([np.array([0, 7, 2]), np.array([0, 2])], pad_id=1)  # [[0, 7, 2], [0, 2, 1]]
    ```
    """
    lengths = np.array([len(row) for row in rows], dtype=np.int64)
    longest = int(lengths.max()) if lengths.size else 0
    if length is None:
        length = longest
    elif longest > length:
        row = int(np.argmax(lengths))
        raise ValueError(f"`length` {length} is shorter than row {row}, which has {longest} token ids.")
    out = np.full((len(rows), int(length)), pad_id, dtype=np.int32)
    if lengths.size:
        flat = np.concatenate([np.asarray(row, dtype=np.int32).reshape(-1) for row in rows])
        out[
            np.repeat(np.arange(len(rows)), lengths),
            np.arange(flat.size) - np.repeat(np.cumsum(lengths) - lengths, lengths),
        ] = flat
    return out


class _HostCache:
    """The built `tokenizers.Tokenizer`, and what it was built from (a plain object: Keras does not track it)."""

    def __init__(self, key, host, id_map):
        self.key, self.host, self.id_map = key, host, id_map

    def matches(self, key):
        return len(key) == len(self.key) and all(a is b or a == b for a, b in zip(key, self.key))


def _state_key(tokenizer, added_tokens):
    """What the host tokenizer is built from: the state objects (compared by identity) and the options."""
    options = ("lowercase", "strip_accents", "clean_text", "handle_chinese_chars", "max_input_chars_per_word")
    options += ("oov_token", "suffix_indicator", "add_prefix_space", "split", "special_tokens_in_strings")
    objects = (tokenizer, getattr(tokenizer, "vocabulary", None), getattr(tokenizer, "merges", None))
    return (
        objects
        + (getattr(tokenizer, "proto", None),)
        + tuple(getattr(tokenizer, o, None) for o in options)
        + (repr(added_tokens),)
    )


def cached_host_tokenizer(owner, tokenizer, added_tokens=()):
    """`host_tokenizer(tokenizer, added_tokens)`, kept on `owner` until the tokenizer's state changes."""
    key = _state_key(tokenizer, added_tokens)
    cache = getattr(owner, "_host_cache", None)
    if cache is None or not cache.matches(key):
        cache = _HostCache(key, *host_tokenizer(tokenizer, added_tokens))
        owner._host_cache = cache
    return cache.host, cache.id_map


def runs_on_host(inputs):
    """Whether a tokenizer called on `inputs` tokenises on the host: outside TensorFlow, and not a TF tensor."""
    return not backends.uses_tensorflow() and not backends.is_tf_tensor(inputs, ragged=True)


def tokenize_on_host(tokenizer, inputs):
    """A tokenizer's `tokenize` outside TensorFlow: its ids, as KerasHub's tokenizers give them there.

    Args:
        tokenizer: one of the tokenizers `host_tokenizer` takes.
        inputs: a string, or a list or 1-D array of strings.

    Returns:
        a list of ids for a string, a list of lists for a batch; with the
        tokenizer's `sequence_length`, an `np.int32` array cut and padded
        with 0 to it.

    Example:
    ```python
    tokenize_on_host(tokenizer, ["The weather is nice today."])  # [[1996, 4633, 2003, 3835, 2651, 1012]]
    ```
    """
    host, _ = cached_host_tokenizer(tokenizer, tokenizer)
    scalar = isinstance(inputs, (str, bytes)) or (isinstance(inputs, np.ndarray) and inputs.ndim == 0)
    texts = [inputs] if scalar and not isinstance(inputs, np.ndarray) else np.asarray(inputs).reshape(-1).tolist()
    texts = [t.decode("utf-8") if isinstance(t, bytes) else t for t in texts]
    ids = [encoding.ids for encoding in host.encode_batch_fast(texts, add_special_tokens=False)]
    length = getattr(tokenizer, "sequence_length", None)
    if length:
        ids = pad_rows([row[:length] for row in ids], 0, length)
    return ids[0] if scalar else ids


class HostTokenizing:
    """Mixin of `SentenceEncoderPreprocessor`: texts -> `[start] ids [end]` on the host, with `tokenizers`.

    It reads the preprocessor's `tokenizer`, `added_tokens`,
    `sequence_length` and `include_segment_ids`. The `tokenizers.Tokenizer`
    is built on first use and rebuilt when the tokenizer's vocabulary,
    options or the added tokens change.
    """

    def host_tokenizer(self):
        """`(tokenizers.Tokenizer, id map)` of this preprocessor (see `host_tokenizer`), cached."""
        return cached_host_tokenizer(self, self.tokenizer, self.added_tokens)

    def host_token_ids(self, texts):
        """A list of `str` -> `(rows, truncated)`, tokenised on the host, as `ragged_token_ids` on TensorFlow.

        Args:
            texts: list of `str` (as `check_texts` returns).

        Returns:
            `rows`: a list of 1-D `np.int32` arrays `[start] ids [end]`, the
            ids cut to the first `sequence_length - 2`; `truncated`: a bool
            array `(n,)` telling which texts were cut.

        Example:
        ```python
        rows, truncated = preprocessor.host_token_ids(["The weather is nice today."])
        ```
        """
        host, id_map = self.host_tokenizer()
        budget = self.sequence_length - 2
        start, end = self.tokenizer.start_token_id, self.tokenizer.end_token_id
        encodings = host.encode_batch_fast(list(texts), add_special_tokens=False)
        truncated = np.zeros(len(encodings), dtype=bool)
        rows = []
        for i, encoding in enumerate(encodings):
            ids = encoding.ids
            truncated[i] = len(ids) > budget
            row = np.empty(min(len(ids), budget) + 2, dtype=np.int32)
            row[0], row[-1] = start, end
            row[1:-1] = ids[:budget]
            for given, wanted in id_map.items():
                row[1:-1][row[1:-1] == given] = wanted
            rows.append(row)
        return rows, truncated

    def host_inputs(self, texts, length=None):
        """A list of `str` -> the model-input dict of `np.int32` arrays, tokenised on the host.

        Args:
            texts: list of `str`.
            length: int or None. The padded length; `None`: the longest row.

        Returns:
            dict: `token_ids`, `padding_mask` (not padding), and all-zero
            `segment_ids` when `include_segment_ids`.

        Example:
        ```python
        inputs = preprocessor.host_inputs(["a", "b c"], length=preprocessor.sequence_length)
        ```
        """
        rows, _ = self.host_token_ids(texts)
        pad_id = self.tokenizer.pad_token_id
        token_ids = pad_rows(rows, pad_id, length)
        inputs = {"token_ids": token_ids, "padding_mask": (token_ids != pad_id).astype(np.int32)}
        if self.include_segment_ids:
            inputs["segment_ids"] = np.zeros_like(token_ids)
        return inputs
