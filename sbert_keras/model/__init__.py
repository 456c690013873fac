"""The encoder's building blocks: backbone, preprocessor, pooling, prompts, precision, similarity.

Keras layers and KerasHub models that `SentenceEncoder` (`sbert_keras/encoder.py`)
assembles, plus the checks of a backbone's configuration and the precision
vocabulary. Nothing here runs inference or reads checkpoints.
"""
