"""The `added_tokens` of a `tokenizer.json`: read, checked, and merged into a vocabulary.

Hugging Face gives the strings of `added_tokens` their own ids wherever a
text holds them (`model.added_tokens` does it in the preprocessor). A token
may also be missing from the model's vocabulary: sentence-transformers
saves MPNet with `<s>`, `</s>`, `<pad>`, `<unk>` and `<mask>` only in
`added_tokens`, so the vocabulary a KerasHub tokenizer takes is the model's
plus these.

Example:
```python
tokens = read_added_tokens("path/to/all-mpnet-base-v2")  # [{"content": "<s>", "id": 0, ...}, ...]
```
"""

import os

from sbert_keras.utils.model_files import read_json


def read_added_tokens(folder):
    """The checked `added_tokens` of `folder/tokenizer.json` (`[]` without one).

    Returns:
        list of dicts: `content`, `id`, `lstrip`, `rstrip`.

    Raises:
        ValueError: an entry that is not a token object, `single_word`
            tokens, or a `normalized` token under a normaliser (matched on
            the normalised text, which is not reproduced); the entry is named.
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
        if entry.get("normalized") and tokenizer.get("normalizer"):
            raise ValueError(
                f"{path}: `added_tokens[{i}]` ({entry['content']!r}) is matched on normalised text "
                "(normalized=true under a normalizer): not supported."
            )
        tokens.append({k: entry.get(k, False) for k in ("content", "id", "lstrip", "rstrip")})
    return tokens


def with_added_tokens(vocab, folder):
    """`vocab` (`{token: id}`) with the added tokens of `folder` that it lacks."""
    vocab = dict(vocab)
    for token in read_added_tokens(folder):
        vocab.setdefault(token["content"], token["id"])
    return vocab
