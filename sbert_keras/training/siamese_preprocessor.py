"""`SiamesePreprocessor`: the encoder's preprocessor applied to each sentence of a pair or triplet.

The siamese models (`sbert_keras.training.siamese`) attach it so that `fit`,
`evaluate` and `predict` take raw strings: inside `tf.data` on TensorFlow,
on the host (`SentenceEncoderPreprocessor.host_inputs`) on JAX and PyTorch.
"""

import keras
import keras_hub
import numpy as np
from keras import ops

from sbert_keras.model.preprocessor import check_texts
from sbert_keras.utils import backends
from sbert_keras.utils.backends import tensorflow as tf


@keras.saving.register_keras_serializable(package="sbert_keras")
class SiamesePreprocessor(keras_hub.models.Preprocessor):
    """Applies the encoder's preprocessor to each sentence of a pair/triplet.

    Args:
        preprocessor: the encoder's `SentenceEncoderPreprocessor`.
        roles: tuple of str, the input sentences in order, e.g.
            `("anchor", "positive", "negative")`.
        dummy_labels: bool. Add all-zero labels when none are given (for
            objectives whose target is implied by the batch).

    Inputs `x` are a tuple/list in `roles` order or a dict keyed by role;
    outputs are a flat dict `{f"{role}_{name}": tensor}`.
    """

    def __init__(self, preprocessor, roles, dummy_labels=False, **kwargs):
        super().__init__(**kwargs)
        self.preprocessor = preprocessor
        self.roles = tuple(roles)
        self.dummy_labels = dummy_labels
        self.build(None)  # built at once, as `SentenceEncoderPreprocessor` is (see its `build`)

    def build(self, input_shape=None):
        self.built = True  # stateless: the wrapped preprocessor holds the vocabulary

    def call(self, x, y=None, sample_weight=None):
        if isinstance(x, dict) and f"{self.roles[0]}_token_ids" in x:
            features = x  # already tokenised, e.g. by `siamese_dataset`
        else:
            features = self.tokenize_columns(x)
        if y is None and self.dummy_labels:
            y = ops.zeros(ops.shape(features[f"{self.roles[0]}_token_ids"])[:1])
        return keras.utils.pack_x_y_sample_weight(features, y, sample_weight)

    def tokenize_columns(self, x):
        """Texts per role -> `{f"{role}_{name}": tensor}`."""
        if isinstance(x, dict):
            missing = [r for r in self.roles if r not in x]
            if missing:
                raise ValueError(f"Inputs miss the key(s) {missing}; expected {self.roles}.")
            columns = [x[r] for r in self.roles]
        else:
            columns = list(x) if isinstance(x, (tuple, list)) else [x]
            if len(columns) != len(self.roles):
                raise ValueError(f"Expected {len(self.roles)} text inputs {self.roles}; received {len(columns)}.")
        if not backends.uses_tensorflow():
            return self._host_columns(columns)
        # One tokenizer call for all roles (one trace, one batch), padded to
        # the batch's longest text rather than to `sequence_length`.
        sizes = [tf.shape(c)[0] for c in columns]
        packed = self.preprocessor.dynamic_inputs(tf.concat(columns, axis=0))
        features = {}
        for name, value in packed.items():
            for role, part in zip(self.roles, tf.split(value, sizes, axis=0), strict=True):
                features[f"{role}_{name}"] = part
        return features

    def _host_columns(self, columns):
        """`tokenize_columns` on the host (JAX, PyTorch): one `host_inputs` call for all roles, NumPy arrays."""
        texts = [check_texts(column, role) for column, role in zip(columns, self.roles, strict=True)]
        packed = self.preprocessor.host_inputs([text for column in texts for text in column])
        cuts = np.cumsum([len(column) for column in texts])[:-1]
        return {
            f"{role}_{name}": part
            for name, value in packed.items()
            for role, part in zip(self.roles, np.split(value, cuts), strict=True)
        }

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "preprocessor": keras.layers.serialize(self.preprocessor),
                "roles": list(self.roles),
                "dummy_labels": self.dummy_labels,
            }
        )
        return config

    @classmethod
    def from_config(cls, config):
        config["preprocessor"] = keras.layers.deserialize(config["preprocessor"])
        return cls(**config)
