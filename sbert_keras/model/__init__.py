"""The encoder's building blocks: backbone, preprocessor, pooling, prompts, precision, similarity.

Keras layers and KerasHub models that `SentenceEncoder` (`sbert_keras/encoder.py`)
assembles, plus the checks of a backbone's configuration (`backbone_config`) and the
precision vocabulary (`precision`). Nothing here runs inference or reads checkpoints.
"""
