"""The inference routes the engine chooses between, one interface each (`base.Route`).

- `keras_graph`: the functional Keras model, the reference; never checked.
- `fused`: the fused graph (float32, bfloat16, float16 matmuls; oneDNN int8).
- `xla_query`: one short text through the XLA-compiled float32 fused graph.
- `xnnpack_int8`: int8 through TFLite's XNNPACK, converted from the fused graph.

A route says whether it is eligible for a request on a host, how it checks
itself against the float32 Keras graph, and builds a `base.Runner` with one
call for a few texts and one for batches. Routes import the layers below
them in `runtime` (graphs, self-check, strings graph, kernels), never the engine.
"""
