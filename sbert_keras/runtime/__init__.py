"""Inference: one engine, its routes, the graphs and kernels they run, batching, and the SavedModel export.

Everything here but `host_engine` and `batching` runs TensorFlow graphs:
it is what `encode` uses when Keras runs on TensorFlow. On JAX and
PyTorch, `host_engine` is the engine. Read top to bottom, each module
importing only those below it:

- `host_engine`: `HostEngine`, the engine on JAX and PyTorch: the host
  tokenizer, smart batching and the Keras graph (one `jax.jit` per shape);

- `engine`: `InferenceEngine`, per encoder and `hardware.Host`: owns the
  runners and the one stale-weights retry, and runs `encode`'s texts;
- `route_choice`: `RouteChoice`, the route chosen once per (compute, size
  class) by a filter and sort over what the routes declare, and the one
  self-check verdict table;
- `routes/`: the routes (`base`: what a route declares and the registry;
  `keras_graph`, `fused`, `xla_query`, `xnnpack`), each building a
  runner with one call for a few texts and one for batches;
- `graphs`: one encoder's traced forward passes and cast weights;
- `self_check`: the probe against the float32 Keras graph and `VerdictTable`;
- `strings_graph`: strings to vectors in one graph call (queries);
- `batching`: length-sorted batches, the truncation report, the final vectors;
- `fused_graph`: the fused forward pass and its cached `FusedWeights`;
- `fused_support`: which encoders the fused graph computes exactly (MPNet's
  relative bias included), their blocks' sublayers by role;
- `kernels/`: hand-built ops (oneDNN LayerNorm, oneDNN int8 matmuls and
  their `MatmulPolicy`, int8 quantization of weights);
- `cold_start`: the first call's status line and the on-disk caches;
- `weight_writes`: when derived weights are stale (write hooks on the
  encoder's own variables);
- `export`: the SavedModel for TF Serving (the forward of the exportable route chosen).
"""
