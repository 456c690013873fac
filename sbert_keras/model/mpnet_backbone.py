"""`MPNetBackbone`: MPNet (Song et al., 2020) as a KerasHub backbone.

Why this is written by hand: KerasHub 0.32 has no MPNet model, and MPNet
cannot be expressed with KerasHub's `TransformerEncoder`: every attention
score gets a learned bias of the relative position of its two tokens
(bucketed as in T5, one table shared by all layers), which KerasHub's and
Keras' attention layers do not take. The embeddings and their LayerNorm
are KerasHub's own `TokenAndPositionEmbedding` and Keras'
`LayerNormalization`, with the attribute names of `RobertaBackbone`
(`embeddings`, `token_embedding`, `embeddings_layer_norm`,
`transformer_layers`); the blocks are `sbert_keras.model.mpnet_layers`.
Hugging Face's MPNet numbers positions from 2 (after its padding id), so a
converter drops the first two rows of the position table, as for RoBERTa.
"""

import keras
import keras_hub
from keras_hub.layers import TokenAndPositionEmbedding

from sbert_keras.model.backbone_config import check_backbone_arguments
from sbert_keras.model.mpnet_layers import MPNetBlock
from sbert_keras.model.mpnet_layers import RelativePositionBias


@keras.saving.register_keras_serializable(package="sbert_keras")
class MPNetBackbone(keras_hub.models.Backbone):
    """MPNet encoder: embeddings -> LayerNorm -> blocks sharing one relative position bias.

    Args:
        vocabulary_size: int. The size of the token vocabulary.
        num_layers: int. The number of transformer blocks.
        num_heads: int. The number of attention heads in each block.
        hidden_dim: int. The size of the hidden states.
        intermediate_dim: int. The width of each feed-forward block.
        dropout: float. Dropout on embeddings and inside each block.
        max_sequence_length: int. The number of position embeddings.
        activation: str. The feed-forward activation (`"gelu"`: exact GELU).
        layer_norm_epsilon: float. The LayerNorm epsilon (MPNet: 1e-5).
        num_buckets: int. Relative-position buckets (MPNet: 32).
        max_distance: int. Relative distances from here on share a bucket (128).
        dtype: the dtype policy of the layers.

    Example:
    ```python
    import numpy as np
    backbone = MPNetBackbone(
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
        layer_norm_epsilon=1e-5,
        num_buckets=32,
        max_distance=128,
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
        self.relative_position_bias = RelativePositionBias(
            num_heads, max_sequence_length, num_buckets, max_distance, dtype=dtype, name="relative_position_bias"
        )
        self.transformer_layers = [
            MPNetBlock(
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
        position_bias = self.relative_position_bias(token_ids)
        for layer in self.transformer_layers:
            x = layer(x, position_bias=position_bias, padding_mask=padding_mask)
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
        self.num_buckets = num_buckets
        self.max_distance = max_distance

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
                "num_buckets": self.num_buckets,
                "max_distance": self.max_distance,
            }
        )
        return config
