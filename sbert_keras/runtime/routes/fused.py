"""The fused graph route: float32, bfloat16 and float16 matmuls, and oneDNN int8.

The forward pass of `sbert_keras.runtime.fused_graph` (fused QKV matmuls,
low-precision matmuls with float32 elsewhere, oneDNN's LayerNorm and int8
kernels) over weights cast once and refreshed when they change. It is
eligible wherever `fused.unsupported_reason` accepts the encoder, and checked
once per precision against the float32 Keras graph (`self_check.probe_check`).
It is also what SavedModels serve (`sbert_keras.runtime.export`).
"""

from sbert_keras.runtime import self_check
from sbert_keras.runtime.routes import base


class FusedRoute(base.Route):
    """The fused graph in any precision (`"int8"`: oneDNN's int8 matmuls).

    Example:
    ```python
    route = FusedRoute(graphs, host)
    route.eligible("bfloat16", "batch") and route.check("bfloat16")
    run = route.build("bfloat16").batch()
    ```
    """

    name = kind = "fused"
    tensorflow_graph = True

    def eligible(self, precision, size):
        return self.graphs.fused_supported()

    def check(self, precision):
        graphs = self.graphs
        reference = graphs.keras_function("float32")
        return self_check.probe_check(self.encoder, reference, graphs.fused_function(precision), precision)

    def build(self, precision):
        graphs = self.graphs

        def resolve():
            weights = graphs.current_weights(precision)
            return graphs.fused_function(precision, weights), (weights,)

        return base.GraphRunner(graphs, resolve, lambda: graphs.fused_function(precision))
