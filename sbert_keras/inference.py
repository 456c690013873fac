"""A fused inference graph for `encode` on RoBERTa/BERT-layout backbones.

Why this exists: `encode` is matmul-bound, and the Keras graph of KerasHub's
`TransformerEncoder` leaves speed on the table on CPU (all-MiniLM-L6-v2,
one batch of 32 x 14 tokens, 2 Zen-4 cores; `benchmarks/encode_profile.py`):

- the query, key and value projections are three small `EinsumDense`
  matmuls, where one fused `[hidden, 3 * hidden]` matmul is more efficient;
- under `mixed_bfloat16` the elementwise ops (erf-GELU, bias adds) also run
  in bfloat16, which TensorFlow's CPU kernels do slowly (the GELU took about
  a quarter of the batch's time), so the policy gained little over float32.

This graph runs the same computation from the same weights, faster per
batch (the benchmark prints both): matmuls with their bias (and GELU) in
`dtype`, so oneDNN fuses them into one kernel, and attention, softmax,
residuals, LayerNorm and pooling in float32. The
weights are snapshot (fused and cast) once per `encode` call and passed in,
so the traced function never holds a stale copy. Keras and KerasHub have no
such mixed "bf16 matmul, float32 elsewhere" inference path, so it is written
here; any other backbone falls back to the Keras graph.
"""

import math

import keras
import keras_hub
import tensorflow as tf

from sbert_keras.backbone import BertLayoutBackbone

# Backbones whose graph is embeddings -> LayerNorm -> post-LN TransformerEncoders.
SUPPORTED_BACKBONES = (BertLayoutBackbone, keras_hub.models.RobertaBackbone)


def supports(backbone):
    """Whether `backbone`'s graph is the one `fused_forward` computes."""
    if not isinstance(backbone, SUPPORTED_BACKBONES):
        return False
    if not isinstance(backbone.embeddings, keras_hub.layers.TokenAndPositionEmbedding):
        return False
    norms = [backbone.embeddings_layer_norm]
    for layer in backbone.transformer_layers:
        if not isinstance(layer, keras_hub.layers.TransformerEncoder) or layer.normalize_first:
            return False
        attention = layer._self_attention_layer
        denses = [attention._query_dense, attention._key_dense, attention._value_dense,
                  attention._output_dense, layer._feedforward_intermediate_dense,
                  layer._feedforward_output_dense]
        if any(dense.bias is None for dense in denses):
            return False
        norms += [layer._self_attention_layer_norm, layer._feedforward_layer_norm]
    return all(n.center and n.scale and not getattr(n, "rms_scaling", False) for n in norms)


def snapshot_weights(backbone, dtype):
    """The backbone's weights as the tensors `fused_forward` takes.

    Matmul kernels and their biases are cast to `dtype`; embeddings and
    LayerNorm parameters stay float32. Query, key and value are fused.
    """

    def low(x):
        return tf.cast(x, dtype)

    def f32(x):
        return tf.cast(x, "float32")

    def norm(layer):
        return (f32(layer.gamma), f32(layer.beta))

    embeddings = backbone.embeddings
    layers = []
    for layer in backbone.transformer_layers:
        attention = layer._self_attention_layer
        qkv = (attention._query_dense, attention._key_dense, attention._value_dense)
        hidden = qkv[0].kernel.shape[0]
        intermediate, output = (layer._feedforward_intermediate_dense,
                                layer._feedforward_output_dense)
        layers.append((
            low(tf.concat([tf.reshape(d.kernel, [hidden, -1]) for d in qkv], axis=1)),
            low(tf.concat([tf.reshape(d.bias, [-1]) for d in qkv], axis=0)),
            low(tf.reshape(attention._output_dense.kernel, [-1, hidden])),
            low(attention._output_dense.bias),
            norm(layer._self_attention_layer_norm),
            low(intermediate.kernel), low(intermediate.bias),
            low(output.kernel), low(output.bias),
            norm(layer._feedforward_layer_norm),
        ))
    return (
        f32(embeddings.token_embedding.embeddings),
        f32(embeddings.position_embedding.position_embeddings),
        norm(backbone.embeddings_layer_norm),
        tuple(layers),
    )


def build_forward(backbone, pooling_layer):
    """The Python function `(token_ids, padding_mask, weights)` -> pooled float32 vectors.

    `weights` comes from `snapshot_weights`. Untraced: `fused_forward` wraps it.
    """
    transformer_layers = backbone.transformer_layers
    num_heads = backbone.num_heads
    epsilons = [backbone.embeddings_layer_norm.epsilon] + [
        (layer._self_attention_layer_norm.epsilon, layer._feedforward_layer_norm.epsilon)
        for layer in transformer_layers
    ]
    activations = [layer._feedforward_intermediate_dense.activation for layer in transformer_layers]

    def layer_norm(x, params, epsilon):
        mean, variance = tf.nn.moments(x, axes=[-1], keepdims=True)
        return tf.nn.batch_normalization(x, mean, variance, params[1], params[0], epsilon)

    def dense(x, kernel, bias, activation=None):
        y = tf.nn.bias_add(tf.matmul(tf.cast(x, kernel.dtype), kernel), bias)
        return y if activation is None else activation(y)

    def forward(token_ids, padding_mask, weights):
        token_table, position_table, embedding_norm, layers = weights
        batch, length = tf.shape(token_ids)[0], tf.shape(token_ids)[1]
        hidden = token_table.shape[-1]
        head_dim = hidden // num_heads
        # `keras.ops.take`, as the embedding layer does (negative ids wrap around).
        x = keras.ops.take(token_table, token_ids, axis=0) + position_table[None, :length]
        x = tf.reshape(layer_norm(x, embedding_norm, epsilons[0]), [-1, hidden])
        mask = tf.cast(padding_mask, "float32")
        attention_bias = ((1.0 - mask) * -1e9)[:, None, None, :]
        for i, (qkv_kernel, qkv_bias, out_kernel, out_bias, norm_1, kernel_1, bias_1,
                kernel_2, bias_2, norm_2) in enumerate(layers):
            qkv = tf.cast(dense(x, qkv_kernel, qkv_bias), "float32")
            qkv = tf.transpose(tf.reshape(qkv, [batch, length, 3, num_heads, head_dim]),
                               [2, 0, 3, 1, 4])
            scores = tf.matmul(qkv[0] * (1.0 / math.sqrt(head_dim)), qkv[1], transpose_b=True)
            context = tf.matmul(tf.nn.softmax(scores + attention_bias), qkv[2])
            context = tf.reshape(tf.transpose(context, [0, 2, 1, 3]), [-1, hidden])
            attended = tf.cast(dense(context, out_kernel, out_bias), "float32")
            x = layer_norm(attended + x, norm_1, epsilons[i + 1][0])
            h = dense(x, kernel_1, bias_1, activations[i])
            x = layer_norm(tf.cast(dense(h, kernel_2, bias_2), "float32") + x, norm_2,
                           epsilons[i + 1][1])
        sequence = tf.reshape(x, [batch, length, hidden])
        return pooling_layer(sequence, padding_mask)

    return forward


def fused_forward(backbone, pooling_layer):
    """`build_forward` as a `tf.function`, traced once per weight dtype.

    Shapes are dynamic, so one trace serves every batch size and length.
    """
    forward = tf.function(build_forward(backbone, pooling_layer))
    traced = {}

    def call(token_ids, padding_mask, weights):
        # One trace per matmul dtype, with dynamic batch and length.
        key = weights[-1][0][0].dtype if weights[-1] else None
        if key not in traced:
            ids_spec = tf.TensorSpec([None, None], tf.int32)
            specs = tf.nest.map_structure(tf.TensorSpec.from_tensor, weights)
            traced[key] = forward.get_concrete_function(ids_spec, ids_spec, specs)
        return traced[key](tf.convert_to_tensor(token_ids, tf.int32),
                           tf.convert_to_tensor(padding_mask, tf.int32), weights)

    return call
