"""The Keras graph route: the functional model's pooled output, the reference every other route is checked against.

It serves every encoder and precision the fused graph cannot (other
backbones, a failed self-check) and is never checked itself. Under a
precision other than the model's own, it runs a copy of the model under
that mixed policy (`graphs.keras_model_for`); Keras has no int8 policy, so
a float encoder asked for int8 falls back to its float32 graph (the engine's
order of routes).
"""

from sbert_keras.runtime.routes import base


class KerasGraphRoute(base.Route):
    """The Keras graph: always eligible, never checked.

    Example:
    ```python
    runner = KerasGraphRoute(graphs, host).build("float32")
    pooled, num_truncated, changed = runner.query(["a query"])
    ```
    """

    name = kind = "keras"
    checked = False
    tensorflow_graph = True

    def eligible(self, precision, size):
        return True

    def build(self, precision):
        graphs = self.graphs

        def resolve():
            return graphs.keras_function(precision), ()

        return base.GraphRunner(graphs, resolve, lambda: graphs.keras_function(precision))
