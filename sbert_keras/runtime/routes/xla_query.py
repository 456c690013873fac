"""One short text through the XLA-compiled float32 fused graph: the single-query path.

Why this exists: a single query is 10-30 tokens, so every matmul of the
fused graph (`sbert_keras.runtime.fused_graph`) has a handful of rows, and TensorFlow's
per-op dispatch and oneDNN's small-matrix kernels, not the arithmetic, set
its latency. XLA, TensorFlow's own compiler (`tf.function(jit_compile=True)`),
compiles the same fused graph into one program, which answers a text of
12 to 32 tokens of all-MiniLM-L6-v2 faster than the oneDNN graph in
bfloat16 or float32 (benchmarks/RESULTS.md, single-query latency). From 4 x
16 tokens (or one text of 64) on it is no faster, so only one text of up to
`MAX_TOKENS` tokens takes it. A base-size model reads twice the bytes of
weights in float32 as in bfloat16, and there the oneDNN graph in bfloat16
can answer first (all-mpnet-base-v2 on an AMX CPU), so the route serves
only where it won a timed race against the fused graph (`races`,
`route_choice.race`), for every compute path it serves.

XLA compiles once per input shape, so the text is padded (and masked) to a
multiple of `BUCKET` tokens: at most `MAX_TOKENS / BUCKET` compilations per
encoder, made by the self-check on first use.
It computes in float32, so a query gets vectors within the float32 gate of
the Keras graph even when batches run in bfloat16. Nothing is trusted
blindly: on first use each probe text runs through it and is compared with
the float32 Keras graph (`self_check.probe_batch`, float32 gate), once the
fused graph has passed its own check; a divergence or an XLA error warns
and turns the route off for that encoder (the engine's verdict table). It
is not used on a GPU, for int8, or for encoders the fused graph refuses.
Its runner sends one text of up to `MAX_TOKENS` tokens to the compiled
graph and a longer one to the fused graph, inside one `tf.cond`.

Example:
```python
encoder.encode("A man is playing a guitar.")  # one text: this route
encoder.engine.verdicts.get("xla", "float32")  # True once checked
```
"""

import warnings

import numpy as np

from sbert_keras.compat import tensorflow as compat_tf
from sbert_keras.runtime import fused_graph
from sbert_keras.runtime import self_check
from sbert_keras.runtime.routes import base
from sbert_keras.utils.backends import tensorflow as tf

# One text of at most this many tokens (after padding to BUCKET) runs here.
MAX_TOKENS = 32
BUCKET = 16
PRECISIONS = ("float32", "bfloat16")


def bucket_length(length, max_length):
    """`length` rounded up to a multiple of `BUCKET`, at most `max_length` (a tensor)."""
    return tf.minimum(-(-length // BUCKET) * BUCKET, max_length)


def pad_to_bucket(token_ids, padding_mask, pad_id, max_length):
    """`(token_ids, padding_mask)` padded on the right to `bucket_length` columns."""
    length = tf.shape(token_ids)[1]
    extra = [[0, 0], [0, bucket_length(length, max_length) - length]]
    return tf.pad(token_ids, extra, constant_values=pad_id), tf.pad(padding_mask, extra)


def fits(token_ids, max_length):
    """A boolean tensor: whether `token_ids` is one text of at most `MAX_TOKENS` padded tokens."""
    padded = bucket_length(tf.shape(token_ids)[1], max_length)
    return tf.logical_and(tf.equal(tf.shape(token_ids)[0], 1), padded <= MAX_TOKENS)


@base.register
class XlaQueryRoute(base.Route):
    """One short text through the XLA-compiled float32 fused graph.

    Example:
    ```python
    route = XlaQueryRoute(graphs, host)
    route.usable()  # True on a CPU, for an encoder the fused graph runs
    ```
    """

    name = "xla"
    rank = 30
    computes = PRECISIONS
    sizes = ("one",)
    check_in = "float32"  # one compiled float32 graph serves every precision
    builds_on = "fused"  # longer texts run the fused graph of the precision asked
    races = ("fused",)  # only where it answers faster than the fused graph
    dequantizes = True

    def __init__(self, graphs, host):
        super().__init__(graphs, host)
        self._wrapped = {}  # run -> run_any (one strings function per run)

    def usable(self):
        return not self.host.gpu and self.graphs.fused_supported()

    def pad_id_and_max_length(self):
        """The tokenizer's padding id and the backbone's longest sequence."""
        encoder = self.encoder
        return encoder.preprocessor.tokenizer.pad_token_id, encoder.backbone.max_sequence_length

    def compiled(self):
        """The XLA-compiled float32 fused forward pass (traced once, compiled per shape)."""
        graphs = self.graphs
        weights = graphs.fused_weights("float32")
        make = lambda: fused_graph.build_forward(graphs.encoder, weights, fused_norm=False)  # noqa: E731
        return graphs.traced(("xla", "float32"), make, jit_compile=True)

    def check(self, precision):
        """Each probe text, padded and compiled, against the float32 Keras graph; warns on failure."""
        token_ids, mask = self_check.probe_batch(self.encoder)
        reference = self.graphs.keras_function("float32")(token_ids, mask).numpy()
        pad_id, max_length = self.pad_id_and_max_length()
        # Called from a graph, as a query's graph calls it: XLA keeps the programs of eager calls
        # apart, so an eager check would leave each bucket to be compiled again by the first query.
        spec = tf.TensorSpec([1, None], tf.int32)
        compiled = compat_tf.traced_once(tf.function(self.compiled(), input_signature=[spec, spec], autograph=False))
        try:
            rows = []
            for ids, row_mask in zip(token_ids, mask):
                length = int(row_mask.sum())
                ids, row_mask = pad_to_bucket(ids[None, :length], row_mask[None, :length], pad_id, max_length)
                rows.append(compiled(ids, row_mask).numpy())
        except (tf.errors.OpError, ValueError, TypeError) as error:
            warnings.warn(f"XLA could not compile the single-query graph ({error}); not using it.", stacklevel=6)
            return False
        measure, value, passed = self_check.divergence(reference, np.concatenate(rows), "float32")
        if not passed:
            warnings.warn(
                f"The XLA single-query graph of {self.encoder.name!r} diverges from the Keras graph "
                f"({measure} = {value:.3g} on the probe texts); not using it.",
                stacklevel=6,
            )
        return passed

    def warm(self, precision, size):
        """Whether a query in `precision` ran here: its graph, with the programs the check compiled, is built."""
        wrapped = self._wrapped.get(self.graphs.built_fused(precision))
        return wrapped is not None and self.graphs.strings.built(wrapped)

    def wrap(self, run):
        """`run(token_ids, mask)` that sends one short text to the compiled graph, the rest to `run`."""
        if run in self._wrapped:
            return self._wrapped[run]
        compiled, (pad_id, max_length) = self.compiled(), self.pad_id_and_max_length()

        def run_any(token_ids, padding_mask):
            small = lambda: compiled(*pad_to_bucket(token_ids, padding_mask, pad_id, max_length))  # noqa: E731
            return tf.cond(fits(token_ids, max_length), small, lambda: tf.cast(run(token_ids, padding_mask), "float32"))

        self._wrapped[run] = run_any
        return run_any

    def build(self, precision):
        graphs = self.graphs

        def resolve():
            weights = graphs.current_weights(precision)
            run = self.wrap(graphs.fused_function(precision, weights))
            return run, tuple(dict.fromkeys([weights, graphs.current_weights("float32")]))

        return base.GraphRunner(graphs, resolve, lambda: graphs.fused_function(precision))
