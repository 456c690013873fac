"""Inference: one engine, its routes, the kernels they use, batching, and the SavedModel export.

`engine` picks a route for each request and owns the one self-check
against the float32 Keras graph and the one stale-weights retry; `routes/`
holds the routes (Keras graph, fused graph, XLA single query, XNNPACK int8),
`kernels/` the hand-built ops (oneDNN LayerNorm and int8 matmuls, int8
quantization), `fused_graph` the fused inference graph, `batching` smart
batching, `cold_start` the first call's status and caches, `weight_writes`
the knowledge of when derived weights are stale, and `export` the
SavedModel for TF Serving.
"""
