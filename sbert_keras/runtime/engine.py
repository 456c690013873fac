"""The inference engine behind `encode`, `predict` and the exported SavedModel.

Why this exists: Keras' `predict` pads every text to the full sequence length
and runs the generic graph; sentence encoding wants smart batching (texts
sorted by length, each batch padded only to its longest text), one traced
function for every shape, cached precision copies of the weights, and the
faster fused graph of `sbert_keras.runtime.fused_graph` where it is proven to compute the
same thing. Neither Keras nor KerasHub has such an engine, so it is here.

`InferenceEngine` owns, per encoder:

- the precision choice (`"auto"`: float16 on a GPU, bfloat16 on a CPU with
  AVX512-BF16 or AMX, float32 otherwise);
- the runners: the fused graph (weights cast and fused once, refreshed when
  the source weights change) or the Keras graph (pooled output of the
  functional model, or of a copy under a mixed policy); for int8 in
  `encode`, `predict` and queries, the same fused graph converted to TFLite
  and run by XNNPACK (`sbert_keras.runtime.routes.xnnpack_int8`, `route`), where it passes its
  own self-check; SavedModels keep TensorFlow graphs (`plan`);
- the self-check: the first time the fused graph runs for a precision, it is
  compared with the float32 Keras graph on a probe batch of different
  lengths (and on that batch repeated, for the large-batch kernels).
  Beyond the gates (float32: max |diff| <= 1e-5 of the vectors' scale;
  bfloat16 / float16: min cosine >= 0.999) it warns, naming the
  model, precision and divergence, and the Keras graph is used instead;
- the single-query call (`query`); batching and the progress bar live in
  `sbert_keras.runtime.batching`, which runs over this engine.
"""

import warnings

import keras
import numpy as np
import tensorflow as tf

from sbert_keras.runtime import batching
from sbert_keras.runtime import cold_start
from sbert_keras.runtime import fused_graph as fused
from sbert_keras.runtime.kernels import int8_quantization as int8_quantize
from sbert_keras.runtime.kernels import onednn_int8 as int8
from sbert_keras.runtime.kernels import onednn_layer_norm as onednn
from sbert_keras.runtime.routes import xla_query as small_query
from sbert_keras.runtime.routes import xnnpack_int8 as xnnpack
from sbert_keras.utils import hardware
from sbert_keras.utils.defaults import PRECISIONS

# Self-check gates of the fused graph against the float32 Keras graph.
FLOAT32_TOLERANCE = 1e-5
MIN_COSINE = {"bfloat16": 0.999, "float16": 0.999, "int8": 0.99}
PROBE_LENGTHS = (2, 5, 9, 17)


def resolve_precision(precision):
    """`precision` checked; `"auto"` (or None) replaced by `auto_precision()`."""
    if precision is None:
        precision = "auto"
    if precision not in PRECISIONS:
        raise ValueError(f"`precision` must be one of {PRECISIONS}. Received {precision!r}.")
    return hardware.auto_precision() if precision == "auto" else precision


def probe_batch(encoder):
    """Token ids and mask of a few texts of different lengths, padded (seeded)."""
    backbone = encoder.backbone
    width = min(max(PROBE_LENGTHS), backbone.max_sequence_length)
    lengths = np.minimum(PROBE_LENGTHS, width)
    rng = np.random.default_rng(0)
    token_ids = rng.integers(0, backbone.vocabulary_size, (len(lengths), width)).astype("int32")
    mask = (np.arange(width)[None, :] < lengths[:, None]).astype("int32")
    return token_ids * mask, mask


def divergence(reference, candidate, precision):
    """`(measure, value, passed)` of `candidate` against the float32 reference."""
    if precision == "float32":
        scale = max(float(np.abs(reference).max()), 1e-6)
        value = float(np.abs(candidate - reference).max()) / scale
        return "max |diff| / scale", value, value <= FLOAT32_TOLERANCE
    norms = np.linalg.norm(reference, axis=1) * np.linalg.norm(candidate, axis=1)
    value = float(((reference * candidate).sum(1) / np.maximum(norms, 1e-12)).min())
    return "min cosine", value, value >= MIN_COSINE[precision]


def probe_check(encoder, reference_run, fused_run, precision, name="fused inference graph", fallback="Keras graph"):
    """Whether `fused_run` computes what `reference_run` does; warns if not.

    Both run the probe batch and that batch repeated into one that takes
    the fused graph's large-batch kernels (`onednn.FUSED_LAYER_NORM_MIN_ROWS`);
    `divergence` against the gate of `precision` decides. `name` and
    `fallback` name the checked path and what serves instead in the warning.
    """
    token_ids, mask = probe_batch(encoder)
    reference = np.asarray(reference_run(token_ids, mask))
    repeat = -(-onednn.FUSED_LAYER_NORM_MIN_ROWS // token_ids.size)
    large = np.asarray(fused_run(np.tile(token_ids, (repeat, 1)), np.tile(mask, (repeat, 1))))
    candidate = np.concatenate([np.asarray(fused_run(token_ids, mask)), large])
    reference = np.concatenate([reference, np.tile(reference, (repeat, 1))])
    measure, value, passed = divergence(reference, candidate, precision)
    if not passed:
        warnings.warn(
            f"The {name} of {encoder.name!r} in {precision} "
            f"diverges from the Keras graph ({measure} = {value:.3g} on the probe "
            f"batch); using the {fallback} instead.",
            stacklevel=4,
        )
    return passed


def keras_model_for(encoder, precision, copies):
    """`encoder`, or a copy of it whose backbone computes in `precision`.

    A quantized encoder always runs as it is (its int8 layers are its
    precision). A copy is built once (kept in `copies`) and re-synced with
    the encoder's weights on every call.
    """
    if fused.quantized_layers(encoder) or encoder.backbone.dtype_policy.compute_dtype == precision:
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
    activation scales (`int8_quantize.KERAS_INT8_RECIPE`: the Keras graph's
    arithmetic on oneDNN's int8 kernel). A float encoder is quantized by
    `int8_quantize.DEFAULT_RECIPE`, its smoothing calibrated on `texts`
    (default: `int8_quantize.CALIBRATION_SENTENCES`) through the Keras graph.
    """
    if fused.quantized_layers(encoder):
        return None, int8_quantize.KERAS_INT8_RECIPE
    blocks = []
    for block in encoder.backbone.transformer_layers:
        parts = fused.block_parts(block)
        blocks.append(
            {
                "qkv": parts.query,
                "attention_output": parts.attention_output,
                "intermediate": parts.intermediate,
                "output": parts.output,
            }
        )
    batches = int8_quantize.calibration_batches(encoder.preprocessor, texts or int8_quantize.CALIBRATION_SENTENCES)
    return int8_quantize.calibrate(encoder.backbone, blocks, batches), int8_quantize.DEFAULT_RECIPE


def keras_forward(model):
    """`(token_ids, padding_mask)` -> the pooled, projected float32 output of `model`'s graph."""
    names = list(model.input)
    pooled = keras.Model(model.input, model.pooling_layer.output)
    project = getattr(model, "project", None)

    def forward(token_ids, padding_mask):
        feed = {"token_ids": token_ids, "padding_mask": padding_mask, "segment_ids": tf.zeros_like(token_ids)}
        out = pooled({n: feed[n] for n in names}, training=False)
        return tf.cast(out if project is None else project(out), "float32")

    return forward


class InferenceEngine:
    """Runs a `SentenceEncoder` for inference: `run(token_ids, mask)` per precision.

    Args:
        encoder: a `SentenceEncoder`.

    Example:
    ```python
    engine = InferenceEngine(encoder)
    run = engine.runner("auto")
    pooled = run(token_ids, padding_mask)  # float32, not L2-normalised
    ```
    """

    def __init__(self, encoder):
        self.encoder = encoder
        self.trace_count = 0
        self._weights = {}  # precision -> fused.FusedWeights
        self._functions = {}  # ("fused" | "keras", precision) -> tf.function
        self._verdicts = {}  # precision -> whether the fused graph passed
        self._copies = {}  # precision -> a SentenceEncoder copy under a mixed policy
        self._stale = set()  # precisions whose cast weights must be re-computed
        self._string_functions = {}  # (runner, sequence length, *weights) -> concrete strings_function(...)
        self._quantized = None  # fused.quantized_layers(encoder), asked once
        self.xnnpack = xnnpack.Int8Route(self)  # int8 through TFLite's XNNPACK, checked on first use
        self.small_query = small_query.SmallQuery(self)  # one short text: XLA float32
        self.verdict_cache = cold_start.VerdictCache(encoder)  # self-check verdicts of earlier processes
        self.prepared = set()  # precisions whose first call is done (`cold_start.status`)
        cold_start.enable_xla_cache()

    def invalidate(self):
        """Marks the cast weights stale: they are re-computed on the next call."""
        self._stale = set(self._weights)

    def fused_weights(self, precision, force=False):
        """The `FusedWeights` of `precision`, synced with the encoder's weights (`force`: re-cast)."""
        if precision not in self._weights:
            stats = recipe = None
            if precision == "int8":
                stats, recipe = int8_setup(self.encoder)
            self._weights[precision] = fused.FusedWeights(self.encoder.backbone, precision, stats, recipe)
        else:
            self._weights[precision].sync(force=force or precision in self._stale)
            self._stale.discard(precision)
        return self._weights[precision]

    def traced(self, key, make_forward, jit_compile=None):
        """`make_forward()` traced once under `key` (dynamic batch and length)."""
        if key not in self._functions:
            spec = tf.TensorSpec([None, None], tf.int32)
            forward = make_forward()

            def counted(token_ids, padding_mask):
                self.trace_count += 1
                return forward(token_ids, padding_mask)

            self._functions[key] = tf.function(counted, input_signature=[spec, spec], jit_compile=jit_compile)
        return self._functions[key]

    def fused_function(self, precision, weights=None):
        """The traced fused graph of `precision` over `weights` (default: synced), unchecked.

        int8's is traced per weights version (`fused.build_forward`'s `constant_int8`), the stale one dropped."""
        weights, int8_graph = weights or self.fused_weights(precision), precision == "int8"
        key = ("fused", precision) + ((weights.version,) if int8_graph else ())
        for old in [k for k in self._functions if int8_graph and k[:2] == key[:2] and k != key]:
            stale = self._functions.pop(old)
            self._string_functions = {k: f for k, f in self._string_functions.items() if k[0] is not stale}
        return self.traced(key, lambda: fused.build_forward(self.encoder, weights, constant_int8=int8_graph))

    def keras_model(self, precision):
        """The encoder, or its copy computing in `precision` (see `keras_model_for`)."""
        return keras_model_for(self.encoder, precision, self._copies)

    def keras_function(self, precision):
        """The Keras graph's pooled (and projected) output, traced once."""
        model = self.keras_model(precision)
        return self.traced(("keras", precision, id(model)), lambda: keras_forward(model))

    def check(self, precision):
        """Whether the fused graph may serve `precision` (self-check on first use)."""
        if precision not in self._verdicts:
            reason = fused.unsupported_reason(self.encoder)
            if reason is not None:
                self._verdicts[precision] = False
            else:

                def check():
                    reference = self.keras_function("float32")
                    return probe_check(self.encoder, reference, self.fused_function(precision), precision)

                self._verdicts[precision] = self.verdict_cache.verdict("fused", precision, check)
        return self._verdicts[precision]

    def plan(self, precision="auto"):
        """`("fused" | "keras", precision)`: what `runner` and the export run.

        `"auto"` takes the fastest precision that passes the self-check:
        `auto_precision()`, else float32, else the Keras graph.
        """
        auto = precision in (None, "auto")
        precision = resolve_precision(precision)
        if auto and self.quantized() and int8.int8_matmul_available():
            precision = "int8"  # an encoder quantized by Keras runs its int8 weights
        if self.check(precision):
            return "fused", precision
        if auto and precision != "float32" and self.check("float32"):
            return "fused", "float32"
        # Keras has no int8 policy: a float encoder falls back to its float32 graph.
        return "keras", "float32" if auto or precision == "int8" else precision

    def quantized(self):
        """Whether Keras quantized the encoder (asked once: `quantize` makes a new engine)."""
        if self._quantized is None:
            self._quantized = bool(fused.quantized_layers(self.encoder))
        return self._quantized

    def route(self, precision="auto"):
        """`(kind, precision)` of `encode`, `predict` and queries: `("xnnpack", "int8")` or `plan`'s.

        int8 runs through XNNPACK where `xnnpack.Int8Route` accepts it; elsewhere, and in SavedModels, `plan` decides.
        """
        return self.xnnpack.route(precision) or self.plan(precision)

    def runner(self, precision="auto"):
        """`run(token_ids, padding_mask)` -> pooled float32 vectors (see `route`)."""
        kind, precision = self.route(precision)
        if kind == "xnnpack":
            return self.xnnpack.runner()
        if kind == "fused":
            return self.fused_function(precision)
        return self.keras_function(precision)

    def query(self, texts, precision="auto"):
        """`(pooled, number truncated)` of a few texts in one call (a single query, see `graph_query`)."""
        kind, precision = self.route(precision)
        if kind == "xnnpack":
            return self.xnnpack.query(texts)
        return graph_query(self, texts, kind, precision)

    def current_weights(self, precision):
        """The `FusedWeights` of `precision`, re-cast if marked stale or written.

        The exact check of Keras writes only (`FusedWeights.written`, no graph call); the caller's graph
        call runs the sampled fingerprint (`FusedWeights.changed`) beside its forward pass."""
        weights = self._weights.get(precision)  # None after a verdict from `verdict_cache`
        if weights is None or precision in self._stale or weights.written():
            return self.fused_weights(precision, force=True)
        return weights


def graph_query(engine, texts, kind, precision, retry=True):
    """`InferenceEngine.query` on a TensorFlow graph (`kind` "fused" or "keras"): strings in, one `tf.function` call.

    On the fused graph, the check for changed weights runs inside that call, beside the
    forward pass; if they changed, the weights are refreshed and the call repeated (once: `retry`).
    """
    synced = []  # the FusedWeights this call reads
    if kind == "fused":
        synced.append(engine.current_weights(precision))
        run = engine.fused_function(precision, synced[0])
        if len(texts) == 1 and engine.small_query.available(precision):
            synced = list(dict.fromkeys(synced + [engine.current_weights("float32")]))
            run = engine.small_query.wrap(run)
    else:
        run = engine.keras_function(precision)
    key = (run, engine.encoder.preprocessor.sequence_length, *synced)  # tokenising bakes in the length
    if key not in engine._string_functions:
        changed = (lambda: synced[0].changed(others=synced[1:])) if synced else None
        embed = batching.strings_function(engine.encoder.preprocessor, run, changed)
        # The concrete function: a call skips tf.function's argument binding (hashing its captures).
        engine._string_functions[key] = embed.get_concrete_function()
    pooled, num_truncated, changed = engine._string_functions[key](tf.constant(texts))
    if bool(changed) and retry:
        for weights in synced:
            weights.sync(force=True)
        return graph_query(engine, texts, kind, precision, retry=False)  # int8: re-traced for the new weights
    return pooled.numpy(), int(num_truncated)
