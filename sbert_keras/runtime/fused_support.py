"""Which encoders the fused graph computes exactly, and their blocks' sublayers by role.

Why this exists: the fused forward pass (`runtime.fused_graph`) rewrites an
encoder's graph, so it may only run where it computes the same thing. The
check is by exact class (a subclass may change `call`) and by every option
that changes the arithmetic, and it names what it refuses, so that the
engine can say why an encoder runs the plain Keras graph. The families it
reads: KerasHub's BERT-layout (`model.backbone.BertLayoutBackbone`),
RoBERTa, XLM-RoBERTa and DistilBERT backbones (post-LayerNorm
`TransformerEncoder` blocks, read through `compat.keras_hub.block_parts`)
and `model.mpnet_backbone.MPNetBackbone` (`MPNetBlock`s sharing one
relative position bias, read through `MPNetBlock.sublayer`).

Example:
```python
unsupported_reason(encoder)  # None, or e.g. "backbone class GemmaBackbone"
parts = block_sublayers(encoder.backbone.transformer_layers[0])
parts.intermediate.kernel.shape  # (hidden, intermediate)
```
"""

import keras
from keras_hub.layers import TokenAndPositionEmbedding
from keras_hub.layers import TransformerEncoder
from keras_hub.models import DistilBertBackbone
from keras_hub.models import RobertaBackbone
from keras_hub.models import XLMRobertaBackbone

from sbert_keras.compat.keras import flatten_layers
from sbert_keras.compat.keras_hub import BlockParts
from sbert_keras.compat.keras_hub import block_parts
from sbert_keras.model.backbone import BertLayoutBackbone
from sbert_keras.model.mpnet_backbone import MPNetBackbone
from sbert_keras.model.mpnet_layers import MPNetBlock

# Backbones whose graph is embeddings -> LayerNorm -> post-LN TransformerEncoders.
KERAS_HUB_BACKBONES = (BertLayoutBackbone, RobertaBackbone, XLMRobertaBackbone, DistilBertBackbone)
# Backbones whose blocks add a relative position bias to the attention scores.
RELATIVE_BIAS_BACKBONES = (MPNetBackbone,)
SUPPORTED_BACKBONES = KERAS_HUB_BACKBONES + RELATIVE_BIAS_BACKBONES
# Activations the fused graph applies by calling the same Keras function.
KNOWN_ACTIVATIONS = (keras.activations.gelu, keras.activations.relu, keras.activations.tanh, keras.activations.linear)


def block_sublayers(block):
    """A block's sublayers by role, as a `compat.keras_hub.BlockParts`.

    Args:
        block: a KerasHub `TransformerEncoder` or an `MPNetBlock` (whose
            `attention` part is None: its attention is not a Keras layer).
    """
    if type(block) is MPNetBlock:
        return BlockParts(attention=None, **{role: block.sublayer(role) for role in MPNetBlock.SUBLAYERS})
    return block_parts(block)


def quantized_layers(encoder):
    """The names of `encoder`'s layers quantized by Keras (`layer.quantization_mode` set)."""
    return [
        layer.name for layer in flatten_layers(encoder, include_self=False) if getattr(layer, "quantization_mode", None)
    ]


def _unreadable_quantized(encoder):
    """Quantized layers the fused graph cannot read: not int8, LoRA, or not a block matmul / the token embedding."""
    readable = set()
    for block in encoder.backbone.transformer_layers:
        parts = block_sublayers(block)
        readable |= {
            id(d)
            for d in (parts.query, parts.key, parts.value, parts.attention_output, parts.intermediate, parts.output)
        }
    readable.add(id(encoder.backbone.embeddings.token_embedding))
    return [
        layer.name
        for layer in flatten_layers(encoder, include_self=False)
        if getattr(layer, "quantization_mode", None)
        and (layer.quantization_mode != "int8" or getattr(layer, "lora_enabled", False) or id(layer) not in readable)
    ]


def supports(encoder):
    """Whether the fused graph computes `encoder`'s graph (see `unsupported_reason`)."""
    return unsupported_reason(encoder) is None


def _attention_reason(block, parts):
    """Why the fused attention differs from `block`'s, or None."""
    if type(block) is MPNetBlock:
        return None  # plain multi-head attention plus the shared bias
    if type(block) is not TransformerEncoder or block.normalize_first:
        return f"block {block.name!r} is not a post-LayerNorm TransformerEncoder"
    config = parts.attention.get_config()
    if (
        config.get("use_gate")
        or config.get("sliding_window") is not None
        or config.get("attention_axes") not in (None, (1,), [1])
        or config.get("output_shape") is not None
        or config["num_heads"] * config["key_dim"] != parts.query.kernel.shape[0]
        or config["value_dim"] != config["key_dim"]
    ):
        return f"attention options of {block.name!r}: {config}"
    return None


def unsupported_reason(encoder):
    """Why the fused graph cannot compute `encoder`'s graph, or `None` if it can.

    Exact class checks: a subclass may change `call`. Of the layers
    quantized by Keras, only the blocks' int8 matmuls (no LoRA) are read
    (`int8_quantize.float_kernel`); any other is refused.

    Args:
        encoder: a `SentenceEncoder`.
    """
    backbone = encoder.backbone
    if type(backbone) not in SUPPORTED_BACKBONES:
        return f"backbone class {type(backbone).__name__}"
    if type(backbone.embeddings) is not TokenAndPositionEmbedding:
        return f"embedding class {type(backbone.embeddings).__name__}"
    block_class = MPNetBlock if type(backbone) in RELATIVE_BIAS_BACKBONES else TransformerEncoder
    unreadable = _unreadable_quantized(encoder) if quantized_layers(encoder) else []
    if unreadable:
        return f"quantized layers {unreadable[:3]} (only Keras int8 block matmuls are read)"
    norms = [backbone.embeddings_layer_norm]
    for block in backbone.transformer_layers:
        if type(block) is not block_class:
            return f"block {block.name!r} is a {type(block).__name__}, not a {block_class.__name__}"
        parts = block_sublayers(block)
        reason = _attention_reason(block, parts)
        if reason:
            return reason
        denses = (parts.query, parts.key, parts.value, parts.attention_output, parts.intermediate, parts.output)
        if any(dense.bias is None for dense in denses):
            return f"a dense layer of {block.name!r} has no bias"
        if parts.intermediate.activation not in KNOWN_ACTIVATIONS:
            return f"activation {parts.intermediate.activation!r} of {block.name!r}"
        if parts.output.activation is not keras.activations.linear:
            return f"output activation of {block.name!r}"
        norms += [parts.attention_norm, parts.feedforward_norm]
    for norm in norms:
        if (
            type(norm) is not keras.layers.LayerNormalization
            or not (norm.center and norm.scale)
            or getattr(norm, "rms_scaling", False)
            or norm.axis not in (-1, [-1], [2])
        ):
            return f"LayerNorm options of {norm.name!r}"
    return None
