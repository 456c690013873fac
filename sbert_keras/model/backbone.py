"""A BERT-layout text backbone with an exact GELU and a configurable epsilon.

Why this exists: KerasHub's `BertBackbone` hard-codes the tanh approximation
of GELU and a segment-id input. Hugging Face / sentence-transformers BERT
checkpoints use the exact (erf) GELU, and a sentence encoder only ever sees
segment 0, whose embedding row is folded into the position table when a
checkpoint is converted (see `sbert_keras.checkpoints.presets`). So this backbone is
KerasHub's `RobertaBackbone` graph with two more arguments, built from
KerasHub's own `TokenAndPositionEmbedding` and `TransformerEncoder` layers.
It keeps the same attribute names as `RobertaBackbone`, so one weight
converter serves both.
"""

import keras
import keras_hub
from keras_hub.layers import TokenAndPositionEmbedding
from keras_hub.layers import TransformerEncoder

from sbert_keras.model.backbone_config import check_backbone_arguments


@keras.saving.register_keras_serializable(package="sbert_keras")
class BertLayoutBackbone(keras_hub.models.Backbone):
    """Post-LayerNorm transformer encoder: embeddings -> LayerNorm -> blocks.

    Args:
        vocabulary_size: int. The size of the token vocabulary.
        num_layers: int. The number of transformer blocks.
        num_heads: int. The number of attention heads in each block.
        hidden_dim: int. The size of the hidden states.
        intermediate_dim: int. The width of each feed-forward block.
        dropout: float. Dropout on embeddings and inside each block.
        max_sequence_length: int. The number of position embeddings.
        activation: str. The feed-forward activation. `"gelu"` is the exact
            (erf) GELU that BERT and RoBERTa checkpoints were trained with.
        layer_norm_epsilon: float. The LayerNorm epsilon (BERT: 1e-12).
        dtype: the dtype policy of the layers.

    Example:
    ```python
    import numpy as np
    backbone = BertLayoutBackbone(
        vocabulary_size=10, num_layers=2, num_heads=2, hidden_dim=8,
        intermediate_dim=16, max_sequence_length=12,
    )
    backbone({"token_ids": np.ones((1, 5), "int32"),
              "padding_mask": np.ones((1, 5), "int32")})
    ```
    """

    def __init__(
        self,
        vocabulary_size,
        num_layers,
        num_heads,
        hidden_dim,
        intermediate_dim,
        dropout=0.1,
        max_sequence_length=512,
        activation="gelu",
        layer_norm_epsilon=1e-12,
        dtype=None,
        **kwargs,
    ):
        sizes = dict(
            vocabulary_size=vocabulary_size,
            num_layers=num_layers,
            num_heads=num_heads,
            hidden_dim=hidden_dim,
            intermediate_dim=intermediate_dim,
            max_sequence_length=max_sequence_length,
            layer_norm_epsilon=layer_norm_epsilon,
            dropout=dropout,
        )
        check_backbone_arguments(sizes, type(self).__name__)  # before a layer is built
        # === Layers ===
        initializer = keras.initializers.TruncatedNormal(stddev=0.02)
        self.embeddings = TokenAndPositionEmbedding(
            vocabulary_size=vocabulary_size,
            sequence_length=max_sequence_length,
            embedding_dim=hidden_dim,
            embeddings_initializer=initializer,
            dtype=dtype,
            name="embeddings",
        )
        self.token_embedding = self.embeddings.token_embedding
        self.embeddings_layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, dtype=dtype, name="embeddings_layer_norm"
        )
        self.embeddings_dropout = keras.layers.Dropout(dropout, dtype=dtype, name="embeddings_dropout")
        self.transformer_layers = [
            TransformerEncoder(
                num_heads=num_heads,
                intermediate_dim=intermediate_dim,
                activation=activation,
                dropout=dropout,
                layer_norm_epsilon=layer_norm_epsilon,
                kernel_initializer=initializer,
                dtype=dtype,
                name=f"transformer_layer_{i}",
            )
            for i in range(num_layers)
        ]

        # === Functional Model ===
        token_ids = keras.Input(shape=(None,), dtype="int32", name="token_ids")
        padding_mask = keras.Input(shape=(None,), dtype="int32", name="padding_mask")
        x = self.embeddings(token_ids)
        x = self.embeddings_layer_norm(x)
        x = self.embeddings_dropout(x)
        for layer in self.transformer_layers:
            x = layer(x, padding_mask=padding_mask)
        super().__init__(
            inputs={"token_ids": token_ids, "padding_mask": padding_mask},
            outputs=x,
            dtype=dtype,
            **kwargs,
        )

        # === Config ===
        self.vocabulary_size = vocabulary_size
        self.num_layers = num_layers
        self.num_heads = num_heads
        self.hidden_dim = hidden_dim
        self.intermediate_dim = intermediate_dim
        self.dropout = dropout
        self.max_sequence_length = max_sequence_length
        self.activation = activation
        self.layer_norm_epsilon = layer_norm_epsilon

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocabulary_size": self.vocabulary_size,
                "num_layers": self.num_layers,
                "num_heads": self.num_heads,
                "hidden_dim": self.hidden_dim,
                "intermediate_dim": self.intermediate_dim,
                "dropout": self.dropout,
                "max_sequence_length": self.max_sequence_length,
                "activation": self.activation,
                "layer_norm_epsilon": self.layer_norm_epsilon,
            }
        )
        return config
