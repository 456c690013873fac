"""Run by the peer virtualenv's python (sentence-transformers 6.2, transformers 5, torch), never imported.

    python sentence_transformers_check.py TEXTS_JSON FOLDER OUT_DIR [FOLDER OUT_DIR ...]

For each FOLDER: loads it with `SentenceTransformer` and encodes the texts
(float32) into OUT_DIR/embeddings.npy; loads the weights with
`transformers.AutoModel` and the tokenizer with `AutoTokenizer`, and writes
OUT_DIR/report.json: the missing, unexpected and mismatched weights, the
model and tokenizer classes, the maximum length, the prompts and the token
ids of every text. One process for every folder: torch imports once.
"""

import json
import pathlib
import sys
import warnings

import numpy as np
import torch
import transformers
from sentence_transformers import SentenceTransformer


def check(folder, texts, out):
    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = SentenceTransformer(folder, device="cpu")
        embeddings = model.encode(texts, batch_size=32, convert_to_numpy=True, precision="float32")
    np.save(out / "embeddings.npy", embeddings.astype("float32"))
    auto, info = transformers.AutoModel.from_pretrained(folder, output_loading_info=True)
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    report = {
        "model_class": type(auto).__name__,
        "tokenizer_class": type(tokenizer).__name__,
        "missing_keys": sorted(info["missing_keys"]),
        "unexpected_keys": sorted(info["unexpected_keys"]),
        "mismatched_keys": sorted(str(k) for k in info.get("mismatched_keys", [])),
        "max_seq_length": model.max_seq_length,
        "similarity_fn_name": model.similarity_fn_name,
        "prompts": model.prompts,
        "default_prompt_name": model.default_prompt_name,
        "ids": [tokenizer(t)["input_ids"] for t in texts],
        "warnings": [str(w.message) for w in caught],
    }
    (out / "report.json").write_text(json.dumps(report), encoding="utf-8")


def main(texts_path, *pairs):
    torch.set_num_threads(1)
    texts = json.loads(pathlib.Path(texts_path).read_text(encoding="utf-8"))
    for folder, out in zip(pairs[::2], pairs[1::2]):
        check(folder, texts, out)


if __name__ == "__main__":
    main(*sys.argv[1:])
