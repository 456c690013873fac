"""Quantizing an encoder's dense layers for `sbert_keras.runtime.kernels.onednn_int8`: weights, smoothing, calibration.

Why hand-written: Keras's `quantize("int8")` quantizes weights and, at call
time, activations per token with plain TensorFlow ops; it has no activation
calibration, no SmoothQuant and no recipe that keeps a sensitive layer in
bf16. Those are what bring all-MiniLM-L6-v2 from a minimum cosine of 0.95
(one scale per batch) or 0.987 (Keras's per-token scheme) to >= 0.99 against
float32 (`benchmarks/experiments/int8_experiment.py` prints the table), so they are
written here, in TensorFlow ops (weights are computed inside a
`tf.function` by the fused graph's weight cache).

`DEFAULT_RECIPE` quantizes as XNNPACK's dynamic int8 kernels do: every
matmul in int8, one uint8 scale and zero point per row of activations
(`"row"`), per output channel for the weights, no smoothing and no
calibration, so a text's vector does not depend on the other texts of its
batch. `BATCH_SCALE_RECIPE` (SmoothQuant alpha 0.5, one activation scale
per batch, the feed-forward output matmul in bf16) runs faster in
TensorFlow, but a text's vector then depends on its batch.
`benchmarks/experiments/int8_experiment.py` prints what each recipe costs.

Example:
```python
stats = calibrate(encoder.backbone, layers_by_role, token_batches)
weights = quantize_role(kernel, bias, "intermediate", stats[0])
```
"""

import keras
import numpy as np

from sbert_keras.compat import keras as keras_compat
from sbert_keras.runtime.kernels import onednn_int8
from sbert_keras.utils.backends import tensorflow as tf

ROLES = ("qkv", "attention_output", "intermediate", "output")
# The recipe of an encoder quantized by Keras (`quantize("int8")`): its own
# int8 weights (re-quantizing the dequantized kernel gives them back) and
# Keras's per-row activation scales, so the fast path computes what Keras's
# int8 layers compute.
KERAS_INT8_RECIPE = dict.fromkeys(ROLES, ("token", None))
# role -> "bfloat16" | "float32" | (activation mode of `onednn_int8.make_weights`, smoothing).
# Smoothing: None, a SmoothQuant alpha, or "outliers" (`outlier_scale`).
DEFAULT_RECIPE = dict.fromkeys(ROLES, ("row", None))
BATCH_SCALE_RECIPE = {
    "qkv": ("dynamic", 0.5),
    "attention_output": ("dynamic", 0.5),
    "intermediate": ("dynamic", 0.5),
    "output": "bfloat16",
}
# Default calibration text when no local text is given: varied English
# sentences (captions, news, questions, forum and technical text, numbers and
# punctuation), written for this package. With `BATCH_SCALE_RECIPE` only the
# SmoothQuant factors come from calibration (activation ranges are measured
# per batch), so a small generic set suffices; `DEFAULT_RECIPE` needs none.
CALIBRATION_SENTENCES = (
    "A man is playing a guitar on the street.",
    "Two dogs are running through a snowy field.",
    "A woman slices an onion in the kitchen.",
    "The plane is taking off from the runway at dawn.",
    "Children are playing football in the park after school.",
    "Stocks fell sharply on Monday after the central bank raised interest rates by half a point.",
    "The government announced a new plan to reduce carbon emissions by 2030.",
    "Police said the suspect was arrested late Tuesday night near the border.",
    "How do I reset my password if I no longer have access to my email?",
    "What is the difference between a virus and a bacterium?",
    "Why does the sky look blue during the day but red at sunset?",
    "Can you recommend a good book about the history of Rome?",
    "I've been using this phone for two years and the battery still lasts all day.",
    "Honestly, the sequel was way better than the original movie.",
    "The function returns None when the input list is empty.",
    "Install the package with pip and restart the kernel before importing it.",
    "The patient was given 500 mg of paracetamol every six hours.",
    "Revenue grew 12% year over year to $4.3 billion in the third quarter.",
    "The committee will meet again on 14 March to review the proposal.",
    "A cat sleeps on the windowsill in the afternoon sun.",
    "The red car is parked next to the blue truck.",
    "Scientists discovered a new species of frog in the rainforest.",
    "She won the gold medal in the 200 metres at the world championships.",
    "The bridge was closed for repairs after the storm damaged its supports.",
    "Is it safe to drink tap water in this city?",
    "Turn left at the second traffic light and the museum is on your right.",
    "The recipe calls for two cups of flour, one egg and a pinch of salt.",
    "Our flight was delayed by three hours because of fog.",
    "Machine learning models can be biased if the training data is not representative.",
    "The orchestra performed Beethoven's ninth symphony to a sold-out hall.",
    "He forgot his umbrella and got soaked on the way home.",
    "Researchers say the vaccine is 90 percent effective against severe illness.",
    "A group of people are sitting around a campfire at night.",
    "The court ruled that the law was unconstitutional.",
    "Please send me the report by Friday afternoon.",
    "The mountain trail is steep, rocky and poorly marked.",
    "Why won't my laptop connect to the Wi-Fi network?",
    "The company plans to cut 1,200 jobs as part of a restructuring.",
    "A boy is riding a bicycle down a hill.",
    "Temperatures will drop below freezing tonight, with snow expected by morning.",
)
# GELU's minimum (at x ~ -0.75) bounds the feed-forward output's inputs.
GELU_MIN = -0.1700


def quantize_kernel(kernel):
    """Symmetric per-output-channel int8 quantization of a `(in, out)` kernel.

    The rule of Keras's `AbsMaxQuantizer(axis=0)`: `q = round(kernel * 127 /
    max|kernel[:, j]|)`. Works eagerly and inside a `tf.function`.

    Args:
        kernel: float `(in, out)`.

    Returns:
        `(q, kernel_range)`: int8 `(in, out)` and float32 `(out,)` tensors,
        `kernel ~= q * kernel_range / 127`.
    """
    kernel = tf.cast(kernel, "float32")
    if kernel.shape.rank != 2:
        raise ValueError(f"`kernel` must be 2-D (in, out). Received shape {kernel.shape}.")
    kernel_range = tf.reduce_max(tf.abs(kernel), axis=0) + 1e-7
    q = tf.clip_by_value(tf.round(kernel * (127.0 / kernel_range)), -127.0, 127.0)
    return tf.cast(q, "int8"), kernel_range


def smoothing_scale(input_max, kernel, alpha=0.5):
    """SmoothQuant's per-input-channel `s = max|x_j|^alpha / max|w_j|^(1 - alpha)`.

    Dividing activation channel `j` by `s_j` and multiplying kernel row `j`
    by it leaves the product unchanged and moves outlier channels (BERT's
    LayerNorm outputs have a few) into the weights, where per-channel
    quantization absorbs them.

    Args:
        input_max: float `(in,)`. Calibrated max |activation| per channel.
        kernel: float `(in, out)`.
        alpha: float. Migration strength, 0 (none) to 1 (all).
    """
    input_max = tf.maximum(tf.cast(input_max, "float32"), 1e-5)
    kernel_max = tf.maximum(tf.reduce_max(tf.abs(tf.cast(kernel, "float32")), axis=1), 1e-5)
    return input_max**alpha / kernel_max ** (1.0 - alpha)


def outlier_scale(input_max, percentile=99.0):
    """Per-channel `s = max(1, max|x_j| / t)`, `t` the `percentile` of the channel maxima.

    A targeted smoothing: only the outlier channels move into the weights.
    """
    input_max = np.asarray(input_max, "float32")
    threshold = max(float(np.percentile(input_max, percentile)), 1e-5)
    return tf.constant(np.maximum(input_max / threshold, 1.0), "float32")


def quantize_dense(kernel, bias, mode="dynamic", input_max=None, alpha=None, input_min=None):
    """Int8 weights of a float dense layer, in the form `onednn_int8.int8_dense` takes.

    Args:
        kernel: float `(in, out)`.
        bias: float `(out,)`.
        mode: str. Activation quantization: `"dynamic"`, `"token"`, `"row"`,
            `"static"` or `"static_u8"` (see `onednn_int8.make_weights`).
        input_max: float `(in,)` or None. Calibrated max |activation| per
            input channel (`calibrate`); needed by the static modes and by
            smoothing.
        alpha: float, `"outliers"` or None. SmoothQuant strength
            (`smoothing_scale`), `"outliers"` (`outlier_scale`) or no
            smoothing.
        input_min: float or None. With `"static_u8"`: a lower bound of the
            activations (GELU outputs: `GELU_MIN`).
    """
    kernel = tf.cast(kernel, "float32")
    smooth = tf.ones([kernel.shape[0]], "float32")
    if alpha is not None:
        if input_max is None:
            raise ValueError("Smoothing (`alpha`) needs the calibrated `input_max`.")
        smooth = outlier_scale(input_max) if alpha == "outliers" else smoothing_scale(input_max, kernel, alpha)
    q, kernel_range = quantize_kernel(kernel * smooth[:, None])
    input_range = input_shift = None
    if mode in ("static", "static_u8"):
        if input_max is None:
            raise ValueError(f"`mode={mode!r}` needs the calibrated `input_max`.")
        input_range = tf.reduce_max(tf.cast(input_max, "float32") / smooth)
    if mode == "static_u8":
        if input_min is None:
            raise ValueError("`mode='static_u8'` needs the lower bound `input_min`.")
        input_shift = max(-float(input_min), 0.0) / smooth
        input_range = tf.reduce_max(tf.cast(input_max, "float32") / smooth + input_shift)
        # x @ k = (x / s + shift) @ (s k) - shift @ (s k), with the quantized s k.
        dequantized = tf.cast(q, "float32") * (kernel_range / 127.0)
        bias = tf.cast(bias, "float32") - tf.linalg.matvec(dequantized, input_shift, transpose_a=True)
    return onednn_int8.make_weights(q, kernel_range, bias, mode, 1.0 / smooth, input_range, input_shift)


def needs_calibration(recipe):
    """Whether a recipe reads `calibrate`'s statistics: smoothing or a static activation range."""
    specs = [spec for spec in recipe.values() if not isinstance(spec, str)]
    return any(alpha is not None or mode.startswith("static") for mode, alpha in specs)


def quantize_role(kernel, bias, role, stats=None, recipe=None, host=None):
    """The `dense` weights of one matmul of a transformer block, by `recipe`.

    Args:
        kernel: float `(in, out)`, in the fused graph's layout.
        bias: float `(out,)`.
        role: str. One of `ROLES`.
        stats: dict or None. `calibrate`'s statistics of the block:
            `{role: (max |x| per channel, min x)}`.
        recipe: dict or None (`DEFAULT_RECIPE`).
        host: a `hardware.Host` or None (this machine): whether bf16 roles may run in bf16.

    Returns:
        `(kernel, bias)` cast to bf16 (float32 on CPUs without it) or float32 for float roles, else int8
        weights (`onednn_int8.INT8_WEIGHT_TYPES`).
    """
    spec = (recipe or DEFAULT_RECIPE)[role]
    if isinstance(spec, str):  # bf16 only where the CPU has it (TensorFlow's bf16 matmul is slow elsewhere)
        dtype = onednn_int8.fallback_dtype(host) if spec == "bfloat16" else spec
        return tf.cast(kernel, dtype), tf.cast(bias, dtype)
    mode, alpha = spec
    input_max, input_min = (None, None) if stats is None else stats[role]
    if role == "output" and mode == "static_u8":
        input_min = GELU_MIN if input_min is None else input_min
    return quantize_dense(kernel, bias, mode, input_max, alpha, input_min)


def keras_int8_kernel(layer):
    """`(q, kernel_range)` of a Keras `Dense`/`EinsumDense` quantized with `quantize("int8")`.

    Reads Keras's int8 kernel and `kernel_scale` and, for `EinsumDense`, its
    reduced axes and scale adjustment (private: `sbert_keras.compat.keras`). The kernel is reshaped to `(in, out)`,
    with the reduced (input) axes first, as the fused graph lays it out.

    Returns:
        int8 `(in, out)` and float32 `(out,)` NumPy arrays such that
        `q * kernel_range / 127` is exactly Keras's dequantized kernel.

    Raises:
        ValueError: the layer is not int8-quantized, has LoRA enabled, or
            reduces over axes other than the leading ones.
    """
    if getattr(layer, "quantization_mode", None) != "int8":
        raise ValueError(
            f"Layer {layer.name!r} is not int8-quantized "
            f"(quantization_mode={getattr(layer, 'quantization_mode', None)!r})."
        )
    if getattr(layer, "lora_enabled", False):
        raise ValueError(f"Layer {layer.name!r} has LoRA enabled; merge it before reading int8 weights.")
    q = np.asarray(keras.ops.convert_to_numpy(keras_compat.int8_kernel(layer)))
    scale = np.asarray(keras.ops.convert_to_numpy(layer.kernel_scale), "float32")
    if isinstance(layer, keras.layers.EinsumDense):
        reduced = tuple(sorted(keras_compat.kernel_reduced_axes(layer)))
        if reduced != tuple(range(len(reduced))):
            raise ValueError(
                f"Layer {layer.name!r} reduces over kernel axes {reduced}; only leading input axes are supported."
            )
        scale = np.asarray(keras.ops.convert_to_numpy(keras_compat.adjust_scale_for_dequant(layer, scale)))
        scale = np.broadcast_to(scale, q.shape)
        fan_in = int(np.prod(q.shape[: len(reduced)]))
        q, scale = q.reshape(fan_in, -1), scale.reshape(fan_in, -1)[0]
    elif q.ndim != 2 or scale.shape != (q.shape[1],):
        raise ValueError(f"Layer {layer.name!r}: unexpected int8 kernel {q.shape} / scale {scale.shape}.")
    return q.astype("int8"), (127.0 / scale).astype("float32")


def float_kernel(layer):
    """The float32 kernel a `Dense`/`EinsumDense` computes with, in its own shape.

    For a layer quantized by Keras (`quantize("int8")`), Keras's
    dequantized int8 kernel / `kernel_scale` (TensorFlow ops: usable in a
    `tf.function`; private reads through `sbert_keras.compat.keras`); else `layer.kernel`.

    Raises:
        ValueError: another quantization mode, or LoRA enabled.
    """
    mode = getattr(layer, "quantization_mode", None)
    if not mode:
        return tf.cast(layer.kernel, "float32")
    if mode != "int8" or getattr(layer, "lora_enabled", False):
        raise ValueError(
            f"Layer {layer.name!r}: only Keras int8 quantization without LoRA is read (quantization_mode={mode!r})."
        )
    scale = tf.cast(layer.kernel_scale, "float32")
    if isinstance(layer, keras.layers.EinsumDense):
        scale = keras_compat.adjust_scale_for_dequant(layer, scale)
    return tf.cast(keras_compat.int8_kernel(layer), "float32") / scale


def float_embeddings(layer):
    """The float32 table of an `Embedding` (Keras int8: its int8 table / `embeddings_scale`, per row)."""
    mode = getattr(layer, "quantization_mode", None)
    if not mode:
        return tf.cast(layer.embeddings, "float32")
    if mode != "int8" or getattr(layer, "lora_enabled", False):
        raise ValueError(
            f"Layer {layer.name!r}: only Keras int8 quantization without LoRA is read (quantization_mode={mode!r})."
        )
    scale = tf.cast(layer.embeddings_scale, "float32")
    return tf.cast(keras_compat.int8_embeddings(layer), "float32") / scale[:, None]


def dequantized_kernel(layer):
    """The float `(in, out)` kernel a Keras int8-quantized layer computes with."""
    q, kernel_range = keras_int8_kernel(layer)
    return q.astype("float32") * (kernel_range / 127.0)


def _fan_in_axes(layer):
    """How many trailing input axes a `Dense` / `EinsumDense` contracts."""
    equation = getattr(layer, "equation", None)
    if not equation:
        return 1
    inputs, output = equation.split("->")
    x, kernel = inputs.split(",")
    return len((set(x) & set(kernel)) - set(output))


class _Recorder:
    """Wraps a layer's `call` to keep the max |x| per channel and min x of its valid rows."""

    def __init__(self, layer):
        self.layer, self.call = layer, layer.call
        self.axes = _fan_in_axes(layer)
        self.mask = None
        self.max = self.min = None
        layer.call = self

    def __call__(self, x, *args, **kwargs):
        rows = np.asarray(x, "float32")
        rows = rows.reshape(int(np.prod(rows.shape[: -self.axes])), -1)
        if self.mask is not None:
            rows = rows[self.mask.reshape(-1)]
        high, low = np.abs(rows).max(axis=0), float(rows.min())
        self.max = high if self.max is None else np.maximum(self.max, high)
        self.min = low if self.min is None else min(self.min, low)
        return self.call(x, *args, **kwargs)

    def restore(self):
        del self.layer.call


def calibrate(backbone, blocks, batches):
    """Activation statistics of each block's matmul inputs, from local text.

    Runs the backbone's Keras graph eagerly on `batches` (for example 300
    STS-B train sentences, tokenized and padded per batch) while each
    watched layer records its inputs, padding rows left out.

    Args:
        backbone: the Keras backbone (called as `backbone({"token_ids",
            "padding_mask"})`).
        blocks: list, per transformer block, of `{role: layer}` for the
            roles of `ROLES` (`"qkv"`: the query projection, whose input the
            key and value share).
        batches: iterable of `(token_ids, padding_mask)` int arrays.

    Returns:
        A list, per block, of `{role: (max |x| per channel (in,), min x)}`.
    """
    recorders = [{role: _Recorder(layer) for role, layer in block.items()} for block in blocks]
    try:
        for token_ids, padding_mask in batches:
            mask = np.asarray(padding_mask).astype(bool)
            for block in recorders:
                for recorder in block.values():
                    recorder.mask = mask
            feed = {"token_ids": tf.constant(token_ids), "padding_mask": tf.constant(padding_mask)}
            if isinstance(backbone.input, dict) and "segment_ids" in backbone.input:
                feed["segment_ids"] = tf.zeros_like(feed["token_ids"])
            backbone(feed, training=False)
    finally:
        for block in recorders:
            for recorder in block.values():
                recorder.restore()
    if any(r.max is None for block in recorders for r in block.values()):
        raise ValueError("`batches` is empty: calibration needs at least one batch of text.")
    return [{role: (r.max, r.min) for role, r in block.items()} for block in recorders]


def calibration_batches(preprocessor, texts, batch_size=32):
    """`(token_ids, padding_mask)` int32 arrays of `texts`, length-sorted and padded per batch.

    Args:
        preprocessor: a `SentenceEncoderPreprocessor` (its `tokenize`).
        texts: list of str. Local calibration text (for example 300 STS-B
            train sentences).
        batch_size: int.
    """
    ids, _ = preprocessor.tokenize(list(texts))
    lengths = ids.row_lengths().numpy()
    order = np.argsort(-lengths, kind="stable")
    flat = ids.to_tensor(preprocessor.tokenizer.pad_token_id).numpy()
    batches = []
    for start in range(0, len(texts), batch_size):
        index = order[start : start + batch_size]
        width = int(lengths[index].max())
        mask = (np.arange(width)[None, :] < lengths[index, None]).astype("int32")
        batches.append((flat[index, :width].astype("int32"), mask))
    return batches
