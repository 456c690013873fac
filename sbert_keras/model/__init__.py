"""The encoder's building blocks: backbones, preprocessor, pooling, prompts, precision, similarity.

Keras layers and KerasHub models that `SentenceEncoder` (`sbert_keras/encoder.py`)
assembles: `backbone` (`BertLayoutBackbone`), `mpnet_backbone` (`MPNetBackbone`,
with its blocks and relative position bias in `mpnet_layers`), `preprocessor`,
`pooling`, `prompts`, `similarity`, plus the checks of a backbone's configuration
(`backbone_config`) and the precision vocabulary (`precision`). `wordpiece`
tokenises as Hugging Face's `tokenizers` (BERT, DistilBERT, MPNet) in the
TensorFlow graph, with the character classes of `unicode_classes`, read from the
generated `unicode_tables` (written by `unicode_derivation` from `tokenizers`).
Nothing here runs inference or reads checkpoints.
"""
