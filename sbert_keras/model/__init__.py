"""The encoder's building blocks: backbones, preprocessor, pooling, prompts, precision, similarity.

Keras layers and KerasHub models that `SentenceEncoder` (`sbert_keras/encoder.py`)
assembles: `backbone` (`BertLayoutBackbone`), `mpnet_backbone` (`MPNetBackbone`,
with its blocks and relative position bias in `mpnet_layers`), `preprocessor`,
`pooling`, `prompts`, `similarity`, the tokenisers Hugging Face's ids need
(`added_tokens`: added tokens split out of texts; `wordpiece`: BERT, DistilBERT
and MPNet, with the character classes of `unicode_classes`, read from the
generated `unicode_tables`, written by `unicode_derivation` from `tokenizers`;
`bpe_tokenizer`, with `bpe_pretokenizer` and `bpe_merges`: RoBERTa's byte-level
BPE; `sentencepiece_tokenizer`: XLM-R's SentencePiece at every space, with
`sentencepiece_proto`, the reader of its model file; `tokenizer_pipeline`: each tokenizer as the
`tokenizer.json` Hugging Face's `tokenizers` reads; `host_tokenizer`: the same ids on the host, with
`tokenizers`, for JAX and PyTorch), plus the
checks of a backbone's configuration (`backbone_config`) and the compute
vocabulary (`precision`). Nothing here runs inference or reads checkpoints.
"""
