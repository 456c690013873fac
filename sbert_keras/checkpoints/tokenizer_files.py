"""KerasHub tokenizers -> the Hugging Face tokenizer files of a sentence-transformers folder.

The reverse of `tokenizer_json` and `sentencepiece_model`: `tokenizer.json`
is the tokenizer's pipeline (`model.tokenizer_pipeline`, the one the host
tokenises with too); beside it go the separate vocabulary files older
readers take (`vocab.txt`; `vocab.json` + `merges.txt`;
`sentencepiece.bpe.model`) and `tokenizer_config.json` (the tokenizer
class, the special tokens, `model_max_length`). Only JSON is written:
neither `tokenizers` nor `transformers` is needed, and the tests check that
both load the files with the token ids of the Keras tokenizer.

Example:
```python
files = tokenizer_files(encoder.preprocessor.tokenizer, "BertTokenizer", max_length=256)
# {"tokenizer.json": {...}, "tokenizer_config.json": {...}, "vocab.txt": "..."}
```
"""

import keras_hub

from sbert_keras.model.tokenizer_pipeline import bpe_merges
from sbert_keras.model.tokenizer_pipeline import is_mpnet
from sbert_keras.model.tokenizer_pipeline import tokenizer_json


def _vocabulary_files(tokenizer):
    """The vocabulary files beside `tokenizer.json`, by file name."""
    if isinstance(tokenizer, keras_hub.models.XLMRobertaTokenizer):
        return {"sentencepiece.bpe.model": bytes(tokenizer.proto)}
    if isinstance(tokenizer, keras_hub.models.RobertaTokenizer):
        merges = bpe_merges(tokenizer)
        return {
            "vocab.json": dict(tokenizer.vocabulary),
            "merges.txt": "#version: 0.2\n" + "".join(m + "\n" for m in merges),
        }
    return {"vocab.txt": "".join(token + "\n" for token in tokenizer.get_vocabulary())}


def tokenizer_files(tokenizer, tokenizer_class, max_length):
    """Every tokenizer file of a sentence-transformers folder, by file name.

    Args:
        tokenizer: a KerasHub `BertTokenizer` (or `LowercasingBertTokenizer`),
            `MPNetTokenizer`, `RobertaTokenizer` or `XLMRobertaTokenizer`.
        tokenizer_class: str. transformers' class name for `tokenizer_config.json`.
        max_length: int. `model_max_length` (the encoder's sequence length).

    Returns:
        dict: file name -> a JSON-able object, a string, or bytes.
    """
    files = {"tokenizer.json": tokenizer_json(tokenizer), **_vocabulary_files(tokenizer)}
    config = {"tokenizer_class": tokenizer_class, "model_max_length": max_length, "backend": "tokenizers"}
    wordpiece = isinstance(tokenizer, keras_hub.tokenizers.WordPieceTokenizer)
    if wordpiece:
        config.update(do_lower_case=bool(tokenizer.lowercase), strip_accents=bool(tokenizer.strip_accents))
        config["unk_token"] = tokenizer.oov_token
    special = {"cls_token": tokenizer.start_token, "sep_token": tokenizer.end_token, "pad_token": tokenizer.pad_token}
    if not wordpiece or is_mpnet(tokenizer):
        special.update(bos_token="<s>", eos_token="</s>", mask_token="<mask>")
        special.setdefault("unk_token", "<unk>")
    else:
        special["mask_token"] = "[MASK]"
    config.update({key: value for key, value in special.items() if key not in config})
    files["tokenizer_config.json"] = dict(sorted(config.items()))
    return files
