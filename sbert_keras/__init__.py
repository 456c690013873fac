"""sbert_keras: Sentence-BERT for Keras 3 and KerasHub."""

import os

# The encoder's tokenisers (tf.text) and the SavedModel export need TensorFlow.
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

from sbert_keras.backbone import BertLayoutBackbone  # noqa: E402
from sbert_keras.encoder import SentenceEncoder  # noqa: E402
from sbert_keras.layers import MaskedPooling  # noqa: E402
from sbert_keras.preprocessor import SentenceEncoderPreprocessor  # noqa: E402

__version__ = "0.1.0"
