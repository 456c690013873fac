"""The traced graphs and cast weights of one encoder, shared by every route.

Why this exists: `encode` wants one traced function for every shape (dynamic
batch and length), precision copies of the weights computed once, and
the faster fused graph of `sbert_keras.runtime.fused_graph`; Keras'
`predict` retraces per shape and casts nothing ahead. `EncoderGraphs` holds,
per encoder:

- the fused weights of each precision (`fused_weights`: cast and fused once,
  refreshed when the source weights change; int8 calibrated and quantized);
- the traced forward passes (`traced`): the fused graph of a precision
  (`fused_function`, int8's and bf16's traced per weights version so that
  oneDNN may keep its weights' layout) and the Keras graph (`keras_function`: the
  functional model's pooled output, or a copy of it under a mixed policy);
- the strings-in query functions over them (`strings`).

Routes (`sbert_keras.runtime.routes`) build their runners from these; the
engine (`sbert_keras.runtime.engine`) decides which route runs.
"""

import keras

from sbert_keras.compat import tensorflow as compat_tf
from sbert_keras.runtime import fused_graph
from sbert_keras.runtime import fused_support
from sbert_keras.runtime import strings_graph
from sbert_keras.runtime.kernels import int8_quantization
from sbert_keras.runtime.kernels import onednn_int8
from sbert_keras.runtime.kernels import onednn_matmul
from sbert_keras.utils import hardware
from sbert_keras.utils.backends import tensorflow as tf


def keras_model_for(encoder, precision, copies):
    """`encoder`, or a copy of it whose backbone computes in `precision`.

    A quantized encoder always runs as it is (its int8 layers are its
    precision). A copy is built once (kept in `copies`) and re-synced with
    the encoder's weights on every call.
    """
    if fused_support.quantized_layers(encoder) or encoder.backbone.dtype_policy.compute_dtype == precision:
        return encoder
    if precision not in copies:
        config = encoder.get_config()
        policy = "float32" if precision == "float32" else f"mixed_{precision}"
        config["backbone"]["config"]["dtype"] = policy
        copies[precision] = type(encoder).from_config(config)
    for target, source in zip(copies[precision].weights, encoder.weights):
        target.assign(source)
    return copies[precision]


def int8_setup(encoder, texts=None):
    """`(stats, recipe)` of the fused graph's int8 weights for `encoder`.

    An encoder quantized by Keras keeps its own int8 weights and per-row
    activation scales (`int8_quantization.KERAS_INT8_RECIPE`: the Keras graph's
    arithmetic on oneDNN's int8 kernel). A float encoder is quantized by
    `int8_quantization.DEFAULT_RECIPE`; a recipe that smooths or uses static
    ranges is calibrated on `texts` (default:
    `int8_quantization.CALIBRATION_SENTENCES`) through the Keras graph.
    """
    if fused_support.quantized_layers(encoder):
        return None, int8_quantization.KERAS_INT8_RECIPE
    if not int8_quantization.needs_calibration(int8_quantization.DEFAULT_RECIPE):
        return None, int8_quantization.DEFAULT_RECIPE
    blocks = []
    for block in encoder.backbone.transformer_layers:
        parts = fused_support.block_sublayers(block)
        blocks.append(
            {
                "qkv": parts.query,
                "attention_output": parts.attention_output,
                "intermediate": parts.intermediate,
                "output": parts.output,
            }
        )
    batches = int8_quantization.calibration_batches(
        encoder.preprocessor, texts or int8_quantization.CALIBRATION_SENTENCES
    )
    return int8_quantization.calibrate(encoder.backbone, blocks, batches), int8_quantization.DEFAULT_RECIPE


def keras_forward(model):
    """`(token_ids, padding_mask)` -> the pooled, projected float32 output of `model`'s graph (any backend)."""
    names = list(model.input)
    pooled = keras.Model(model.input, model.pooling_layer.output)
    project = getattr(model, "project", None)

    def forward(token_ids, padding_mask):
        feed = {"token_ids": token_ids, "padding_mask": padding_mask, "segment_ids": keras.ops.zeros_like(token_ids)}
        out = pooled({n: feed[n] for n in names}, training=False)
        return keras.ops.cast(out if project is None else project(out), "float32")

    return forward


class EncoderGraphs:
    """The traced graphs and cast weights of one encoder on one host.

    Args:
        encoder: a `SentenceEncoder`.
        host: a `hardware.Host`, or None for this machine's (int8's matmul policy and bf16 roles).

    Example:
    ```python
    graphs = EncoderGraphs(encoder)
    run = graphs.fused_function("bfloat16")  # unchecked: the engine checks routes
    pooled = run(token_ids, padding_mask)
    ```
    """

    def __init__(self, encoder, host=None):
        self.encoder = encoder
        self.host = host or hardware.current_host()
        self.trace_count = 0
        self.functions = {}  # ("fused" | "keras" | "xla", precision, ...) -> tf.function
        self.strings = strings_graph.StringsFunctions(encoder.preprocessor)
        self._weights = {}  # precision -> fused_graph.FusedWeights
        self._copies = {}  # precision -> a SentenceEncoder copy under a mixed policy
        self._stale = set()  # precisions whose cast weights must be re-computed
        self._quantized = self._unsupported = None  # asked once (`quantize` makes a new engine)

    def quantized(self):
        """Whether Keras quantized the encoder."""
        if self._quantized is None:
            self._quantized = bool(fused_support.quantized_layers(self.encoder))
        return self._quantized

    def fused_supported(self):
        """Whether the fused graph computes the encoder's graph (`fused_support.unsupported_reason`)."""
        if self._unsupported is None:
            self._unsupported = fused_support.unsupported_reason(self.encoder) or ""
        return not self._unsupported

    def invalidate(self):
        """Marks the cast weights stale: they are re-computed on the next call."""
        self._stale = set(self._weights)

    def fused_weights(self, precision, force=False):
        """The `FusedWeights` of `precision`, synced with the encoder's weights (`force`: re-cast)."""
        if precision not in self._weights:
            stats, recipe = int8_setup(self.encoder) if precision == "int8" else (None, None)
            self._weights[precision] = fused_graph.FusedWeights(
                self.encoder.backbone, precision, stats, recipe, self.host
            )
        else:
            self._weights[precision].sync(force=force or precision in self._stale)
            self._stale.discard(precision)
        return self._weights[precision]

    def current_weights(self, precision):
        """The `FusedWeights` of `precision`, re-cast if marked stale or written through Keras.

        No graph call (`FusedWeights.written` is exact for Keras writes); the caller's
        graph call runs the sampled fingerprint (`FusedWeights.changed`) beside its forward pass.
        """
        weights = self._weights.get(precision)
        if weights is None or precision in self._stale or weights.written():
            return self.fused_weights(precision, force=True)
        return weights

    def traced(self, key, make_forward, jit_compile=None, groups=1):
        """`make_forward()` traced once under `key` (dynamic batch and length), for `groups` batches a call."""
        if key not in self.functions:
            spec = tf.TensorSpec([None, None], tf.int32)
            forward = make_forward()

            def counted(*token_ids_and_masks):
                self.trace_count += 1
                return forward(*token_ids_and_masks)

            self.functions[key] = compat_tf.traced_once(
                tf.function(counted, input_signature=[spec] * (2 * groups), jit_compile=jit_compile, autograph=False)
            )
        return self.functions[key]

    def fused_function(self, precision, weights=None, groups=1):
        """The traced fused graph of `precision` over `weights` (default: synced), unchecked.

        `groups=2`: `run(token_ids, padding_mask, token_ids, padding_mask)`,
        two padded batches in one call (`fused_graph.build_forward`). int8's
        runs oneDNN's op with constant weights where the host allows
        (`onednn_int8.MatmulPolicy.for_host`), and bf16's its matmuls so where
        `onednn_matmul.constant_matmul_available()`: those are traced per
        weights version and the stale trace dropped.
        """
        weights = weights or self.fused_weights(precision)
        bf16 = precision == "bfloat16" and self.host.bf16 and onednn_matmul.constant_matmul_available()
        constant = precision == "int8" or bf16
        key = ("fused" if groups == 1 else f"fused_{groups}", precision) + ((weights.version,) if constant else ())
        if constant and key not in self.functions:
            for old in [k for k in self.functions if k[:2] == key[:2]]:
                self.strings.drop(self.functions.pop(old))

        def make():
            policy = None
            if precision == "int8":
                policy = onednn_int8.MatmulPolicy.for_host(self.host, constant_weights=True)
            elif bf16:
                policy = onednn_int8.MatmulPolicy(constant_bf16=True)
            return fused_graph.build_forward(self.encoder, weights, matmul_policy=policy)

        return self.traced(key, make, groups=groups)

    def built_fused(self, precision):
        """The fused graph of `precision` traced so far (its latest weights version's), or None."""
        return next((run for key, run in self.functions.items() if key[:2] == ("fused", precision)), None)

    def keras_model(self, precision):
        """The encoder, or its copy computing in `precision` (see `keras_model_for`)."""
        return keras_model_for(self.encoder, precision, self._copies)

    def keras_function(self, precision):
        """The Keras graph's pooled (and projected) output, traced once."""
        model = self.keras_model(precision)
        return self.traced(("keras", precision, id(model)), lambda: keras_forward(model))
