"""The `added_tokens` of a `tokenizer.json`: read, checked, and merged into a vocabulary.

Hugging Face gives the strings of `added_tokens` their own ids wherever a
text holds them (`model.added_tokens` does it in the preprocessor). A token
may also be missing from the model's vocabulary: sentence-transformers
saves MPNet with `<s>`, `</s>`, `<pad>`, `<unk>` and `<mask>` only in
`added_tokens`, so the vocabulary a KerasHub tokenizer takes is the model's
plus these, at the ids `added_tokens` gives them (those the post-processor
packs a text with). Inside a text, `tokenizers` numbers such a token as
its `AddedVocabulary` does (after the model's vocabulary, in order; it
warns that the file's id differs), and `read_added_tokens` returns those
ids, so a text's ids are `tokenizers`' own.

Example:
```python
tokens = read_added_tokens("path/to/all-mpnet-base-v2")  # [{"content": "<s>", "id": 0, ...}, ...]
```
"""

import os

from sbert_keras.utils.model_files import read_json

# Normalisers whose text the preprocessor reproduces in the graph (`model.wordpiece.normalize`),
# so that an added token matched on the normalised text (`"normalized": true`) is found as `tokenizers` finds it.
NORMALIZERS_REPRODUCED = ("BertNormalizer",)


def read_added_tokens(folder):
    """The checked `added_tokens` of `folder/tokenizer.json` (`[]` without one).

    Returns:
        list of dicts: `content`, `id`, `lstrip`, `rstrip`, and `normalized`
        (True) for a token matched on the normalised text (MPNet's `<unk>`).

    Raises:
        ValueError: an entry that is not a token object, `single_word`
            tokens, or a `normalized` token under a normaliser other than
            `NORMALIZERS_REPRODUCED`; the entry is named.
    """
    tokenizer = read_json(folder, "tokenizer.json") or {}
    path = os.path.join(folder, "tokenizer.json")
    entries = tokenizer.get("added_tokens") or []
    if not isinstance(entries, list):
        raise ValueError(f"{path}: `added_tokens` must be a list; found {type(entries).__name__}.")
    tokens = []
    for i, entry in enumerate(entries):
        good = isinstance(entry, dict) and isinstance(entry.get("content"), str) and entry["content"]
        if not good or isinstance(entry.get("id"), bool) or not isinstance(entry.get("id"), int):
            raise ValueError(f"{path}: `added_tokens[{i}]` must have a non-empty `content` and an integer `id`.")
        if entry.get("single_word"):
            raise ValueError(f"{path}: `added_tokens[{i}]` ({entry['content']!r}) has single_word=true: not supported.")
        normalizer = (tokenizer.get("normalizer") or {}).get("type")
        if entry.get("normalized") and normalizer and normalizer not in NORMALIZERS_REPRODUCED:
            raise ValueError(
                f"{path}: `added_tokens[{i}]` ({entry['content']!r}) is matched on text normalised by a "
                f"{normalizer} (normalized=true): not supported (only under {', '.join(NORMALIZERS_REPRODUCED)})."
            )
        token = {k: entry.get(k, False) for k in ("content", "id", "lstrip", "rstrip")}
        tokens.append(token | {"normalized": True} if entry.get("normalized") and normalizer else token)
    vocab = _model_vocabulary(tokenizer.get("model"))
    if vocab is None:
        return tokens
    assigned = {}
    for token in tokens:  # `AddedVocabulary::add_tokens` of `tokenizers`
        if token["content"] in assigned:
            continue
        if token["content"] in vocab:
            assigned[token["content"]] = vocab[token["content"]]
        else:
            top = max(assigned.values(), default=None)
            size = len(vocab)
            assigned[token["content"]] = size if top is None or (top < size and size) else top + 1
    return [dict(t, id=assigned[t["content"]]) for t in tokens]


def _model_vocabulary(model):
    """`{token: id}` of a `tokenizer.json` model (a dict for BPE / WordPiece, `[piece, score]` pairs for Unigram)."""
    vocab = model.get("vocab") if isinstance(model, dict) else None
    if isinstance(vocab, dict):
        return vocab
    if isinstance(vocab, list):
        return {v[0]: i for i, v in enumerate(vocab) if isinstance(v, list) and v and isinstance(v[0], str)}
    return None


def with_added_tokens(vocab, folder):
    """`vocab` (`{token: id}`) with the added tokens of `folder` that it lacks, at the file's ids."""
    entries = (read_json(folder, "tokenizer.json") or {}).get("added_tokens") or []
    vocab = dict(vocab)
    for entry in entries:
        if isinstance(entry, dict) and isinstance(entry.get("content"), str) and isinstance(entry.get("id"), int):
            vocab.setdefault(entry["content"], entry["id"])
    return vocab
