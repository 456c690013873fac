"""The fused graph route: float32, bfloat16 and float16 matmuls, and oneDNN int8.

The forward pass of `sbert_keras.runtime.fused_graph` (fused QKV matmuls,
low-precision matmuls with float32 elsewhere, oneDNN's LayerNorm and int8
kernels) over weights cast once and refreshed when they change. It is
usable wherever `fused_support.unsupported_reason` accepts the encoder, and checked
once per precision against the float32 Keras graph (`self_check.probe_check`).
`compute="auto"` picks its int8 only where oneDNN runs int8 matmuls
(`onednn_int8.int8_matmul_available`); an explicit int8 request runs it anyway
(dequantized). It is what SavedModels serve in a float compute path
(`forward`), with its weights in their cast and fused form. An encoder
quantized by Keras it serves in int8 only (`Route.serves`): its int8 graph
is Keras' int8 arithmetic, its float graphs would not be.
"""

from sbert_keras.runtime import fused_graph
from sbert_keras.runtime import self_check
from sbert_keras.runtime.kernels import onednn_int8
from sbert_keras.runtime.routes import base
from sbert_keras.utils.defaults import EXPORT_COMPUTES


@base.register
class FusedRoute(base.Route):
    """The fused graph in any precision (`"int8"`: oneDNN's int8 matmuls).

    Example:
    ```python
    route = FusedRoute(graphs, host)
    route.usable() and route.check("bfloat16")
    run = route.build("bfloat16").batch()
    ```
    """

    name = "fused"
    rank = 20
    computes = ("float32", "bfloat16", "float16", "int8")
    exportable = EXPORT_COMPUTES[1:]  # not "auto"
    dequantizes = True

    def usable(self):
        return self.graphs.fused_supported()

    def fast(self, precision):
        return precision != "int8" or onednn_int8.int8_matmul_available(self.host)

    def check(self, precision):
        graphs = self.graphs
        reference = graphs.keras_function("float32")
        fallback = "float32 path" if precision == "int8" else "Keras graph"
        run = graphs.fused_function(precision)
        return self_check.probe_check(self.encoder, reference, run, precision, fallback=fallback)

    def check_groups(self, precision):
        """Whether the graph of two batches a call (`EncoderGraphs.fused_function(groups=2)`) passes the check.

        The probe batch runs as two batches, each padded to its own longest
        text, against the float32 Keras graph (`self_check.probe_check`).
        """
        graphs, grouped = self.graphs, self.graphs.fused_function(precision, groups=2)

        def halves(token_ids, mask):
            inputs, half = [], len(token_ids) // 2
            for rows in (slice(0, half), slice(half, None)):
                width = int(mask[rows].sum(axis=1).max())
                inputs += [token_ids[rows, :width], mask[rows, :width]]
            return grouped(*inputs)

        name = "fused inference graph of two batches a call"
        fallback = "fused graph, one batch a call"
        return self_check.probe_check(self.encoder, graphs.keras_function("float32"), halves, precision, name, fallback)

    def warm(self, precision, size):
        run = self.graphs.built_fused(precision)  # a batch: that graph; a query: it in a strings graph
        if size == "batch":
            return run is not None and run.experimental_get_tracing_count() > 0
        return run is not None and self.graphs.strings.built(run)

    def build(self, precision):
        return base.fused_runner(self.graphs, precision)

    def forward(self, precision):
        """The fused forward pass over its cast weights."""
        weights = self.graphs.fused_weights(precision)
        projections = list(getattr(self.encoder, "projections", None) or [])
        forward = fused_graph.build_forward(self.encoder, weights)
        return forward, [weights.module] + projections
