"""Peer: base-shaped sentence-transformers folders of each family with seeded random weights.

Usage (with the sentence-transformers interpreter):
    make_base_shape.py --out DIR --bert-tokenizer MINILM_DIR --roberta-tokenizer TINY_ROBERTA_DIR \
        [--xlm-roberta-tokenizer XLMR_FIXTURE_DIR] [--families bert,roberta,distilbert,xlm-roberta]

Writes `DIR/bert-base` (12 layers, 768 wide, 12 heads, 3,072 feed-forward,
MiniLM's 30,522-token WordPiece), `DIR/roberta-base` (the same sizes, 514
positions, the 2,000-token byte-level BPE of the tiny RoBERTa reference),
`DIR/distilbert-base` (DistilBERT's base: 6 layers of the same width,
MiniLM's WordPiece) and `DIR/xlm-roberta-base` (RoBERTa's sizes, the
SentencePiece model of the tiny XLM-R fixture), each
Transformer -> mean Pooling -> Normalize, `max_seq_length` 256. The weights
are `transformers`' own initialisation under `torch.manual_seed(0)`: the
folders are for speed only (their embeddings mean nothing, and the small BPE
cuts a sentence into more tokens than RoBERTa's 50k vocabulary would).
The module files are written in the classic layout
(`sentence_transformers.models.*`, as all-MiniLM-L6-v2 ships), which
sentence-transformers 5.x (the ONNX Runtime and fastembed venv) and 6.x both
read. A folder that already holds a `modules.json` is kept. Prints one JSON line
per folder: its path, parameter count and the config it was built from.
"""

import argparse
import json
import shutil
import tempfile
from pathlib import Path

import peer_common

SHAPE = dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072)
TOKENIZER_FILES = (
    "vocab.txt",
    "vocab.json",
    "merges.txt",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "sentencepiece.bpe.model",
)
FAMILIES = ("bert", "roberta", "distilbert", "xlm-roberta")
MAX_SEQ_LENGTH = 256
CLASSIC_MODULES = ("Transformer", "Pooling", "Normalize")


def family_config(transformers, family, source):
    """`(config, model class)` of the base-shaped `family`, with the vocabulary and special ids of `source`."""
    if family == "distilbert":
        config = transformers.DistilBertConfig(vocab_size=source.vocab_size, dim=768, n_layers=6, n_heads=12)
        return config, transformers.DistilBertModel
    if family == "bert":
        return transformers.BertConfig(vocab_size=source.vocab_size, **SHAPE), transformers.BertModel
    roberta = family == "roberta"
    config_class = transformers.RobertaConfig if roberta else transformers.XLMRobertaConfig
    config = config_class(
        vocab_size=source.vocab_size,
        max_position_embeddings=514,
        type_vocab_size=1,
        pad_token_id=source.pad_token_id,
        bos_token_id=source.bos_token_id,
        eos_token_id=source.eos_token_id,
        layer_norm_eps=1e-5,
        **SHAPE,
    )
    return config, transformers.RobertaModel if roberta else transformers.XLMRobertaModel


def build(out, family, tokenizer_dir):
    """Writes the `family` (one of `FAMILIES`) folder at `out`; returns its summary."""
    torch = peer_common.setup_torch()
    import transformers
    from sentence_transformers import SentenceTransformer
    from sentence_transformers import models

    config, model_class = family_config(transformers, family, transformers.AutoConfig.from_pretrained(tokenizer_dir))
    torch.manual_seed(0)
    extra = {} if family == "distilbert" else {"add_pooling_layer": False}
    model = model_class(config, **extra).eval()
    with tempfile.TemporaryDirectory() as staging:
        model.save_pretrained(staging)
        for name in TOKENIZER_FILES:
            if (Path(tokenizer_dir) / name).is_file():
                shutil.copy(Path(tokenizer_dir) / name, staging)
        transformer = models.Transformer(staging, max_seq_length=MAX_SEQ_LENGTH)
        pooling = models.Pooling(config.hidden_size, "mean")
        SentenceTransformer(modules=[transformer, pooling, models.Normalize()], device="cpu").save(str(out))
    write_classic_layout(out, config.hidden_size)
    return {
        "folder": str(out),
        "family": family,
        "parameters": sum(p.numel() for p in model.parameters()),
        "config": config.to_diff_dict(),
        "tokenizer_from": str(tokenizer_dir),
    }


def write_classic_layout(out, dim):
    """Rewrites the module files of `out` in the layout every sentence-transformers release reads."""
    modules = json.loads((out / "modules.json").read_text())
    for module, name in zip(modules, CLASSIC_MODULES):
        module["type"] = f"sentence_transformers.models.{name}"
    (out / "modules.json").write_text(json.dumps(modules, indent=2))
    settings = {"max_seq_length": MAX_SEQ_LENGTH, "do_lower_case": False}
    (out / "sentence_bert_config.json").write_text(json.dumps(settings, indent=2))
    pooling = {"word_embedding_dimension": dim, "pooling_mode_mean_tokens": True}
    pooling.update(dict.fromkeys(("pooling_mode_cls_token", "pooling_mode_max_tokens"), False))
    (out / "1_Pooling" / "config.json").write_text(json.dumps(pooling, indent=2))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="folder to write bert-base/ and roberta-base/ into")
    parser.add_argument("--bert-tokenizer", required=True, help="a BERT folder whose WordPiece is used (MiniLM)")
    parser.add_argument("--roberta-tokenizer", required=True, help="a RoBERTa folder whose BPE is used")
    parser.add_argument("--xlm-roberta-tokenizer", default=None, help="an XLM-R folder whose SentencePiece is used")
    parser.add_argument("--families", default="bert,roberta", help=f"comma-separated subset of {','.join(FAMILIES)}")
    args = parser.parse_args()
    tokenizers = {
        "bert": args.bert_tokenizer,
        "roberta": args.roberta_tokenizer,
        "distilbert": args.bert_tokenizer,
        "xlm-roberta": args.xlm_roberta_tokenizer,
    }
    for family in args.families.split(","):
        if family not in FAMILIES or tokenizers[family] is None:
            parser.error(f"--families: {family!r} is not one of {FAMILIES}, or its tokenizer folder is not given")
        out = Path(args.out) / f"{family}-base"
        if (out / "modules.json").is_file():
            peer_common.emit(folder=str(out), family=family, kept=True)
            continue
        peer_common.emit(**build(out, family, tokenizers[family]), versions=peer_common.versions())


if __name__ == "__main__":
    main()
