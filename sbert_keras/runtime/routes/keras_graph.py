"""The Keras graph route: the functional model's pooled output, the reference every other route is checked against.

It serves every encoder and precision the fused graph cannot (other
backbones, a failed self-check) and is never checked itself. Under a
precision other than the model's own, it runs a copy of the model under
that mixed policy (`graphs.keras_model_for`). Keras has no int8 policy, so
it serves no int8 request: where no int8 route passes its check, the
request falls back to float32 (`RouteChoice.computes`). `compute="auto"`
picks it in float32 only: the reference, the last fallback.
"""

from sbert_keras.runtime.graphs import keras_forward
from sbert_keras.runtime.routes import base
from sbert_keras.utils.defaults import EXPORT_COMPUTES


@base.register
class KerasGraphRoute(base.Route):
    """The Keras graph: usable everywhere, never checked, the lowest rank.

    Example:
    ```python
    runner = KerasGraphRoute(graphs, host).build("float32")
    pooled, num_truncated, changed = runner.query(["a query"])
    ```
    """

    name = "keras"
    rank = 0
    computes = ("float32", "bfloat16", "float16")
    exportable = EXPORT_COMPUTES[1:]  # not "auto"
    checked = False

    def fast(self, precision):
        return precision == "float32"

    def build(self, precision):
        graphs = self.graphs

        def resolve():
            return graphs.keras_function(precision), ()

        return base.GraphRunner(graphs, resolve, lambda: graphs.keras_function(precision))

    def forward(self, precision):
        """The Keras model (or its copy under the mixed policy of `precision`) as a forward pass."""
        model = self.graphs.keras_model(precision)
        return keras_forward(model), [model]
