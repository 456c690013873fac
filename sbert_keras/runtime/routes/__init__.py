"""The inference routes the engine chooses between, each describing itself (`base.Route`).

- `base`: what a route declares, its `Runner`, and the registry (`register`).
- `keras_graph`: the functional Keras model, the reference; never checked.
- `fused`: the fused graph (float32, bfloat16, float16 matmuls; oneDNN int8).
- `xla_query`: one short text through the XLA-compiled float32 fused graph.
- `xnnpack`: int8 (VNNI/AMX CPUs) and float32 (AVX2 CPUs; with AVX-512, a few texts)
  through TFLite's XNNPACK, converted from the fused graph;
- `xnnpack_runner`: how the XNNPACK routes answer a query, and hand a large one to the fused graph.

A route declares the compute paths and size classes it serves, what the
host must offer, its rank, whether a SavedModel can hold it and how it
checks itself against the float32 Keras graph; it builds a `base.Runner`
with one call for a few texts and one for batches. Routes import the layers
below them in `runtime` (graphs, self-check, strings graph, kernels), never
the engine; the engine imports each route module, which registers its class.
"""
