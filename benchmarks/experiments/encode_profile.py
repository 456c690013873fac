"""Where `encode`'s time goes: one batch, op by op, Keras graph vs fused graph.

One batch of 32 STS-B dev sentences (the 32 around the median token length,
padded to the longest of them) runs through eight graphs of all-MiniLM-L6-v2
(`--shape mpnet`: the real all-mpnet-base-v2, fetched by `fetch_mpnet.py`):

- `keras_float32`: the functional model (KerasHub `TransformerEncoder`s);
- `keras_mixed_bfloat16`: the same under the `mixed_bfloat16` policy;
- `fused_float32`, `fused_bfloat16`, `fused_int8`: `sbert_keras.runtime.fused_graph`'s
  graph, what `encode` runs (int8: the default recipe);
- `fused_*_xla`: the float graphs with `jit_compile=True` and the
  composite LayerNorm (timing only);
- `matmuls_only_bfloat16`: the fused bf16 graph's dense layers alone
  (their bias and GELU fused, as there), each fed the previous one's output:
  what the batch would take if nothing but its matmuls ran (timing only).

Also measured: the GFLOP/s of bare `tf.matmul`s in float32 and bfloat16, a
large 2048^3 one (a practical peak of these cores) and the feed-forward
matmul of that batch, for scale.

Per graph: the median milliseconds per batch over `--repeats` runs, and the
share of each TensorFlow op type in a full step-stats trace (the frozen
graph run through a `tf.compat.v1.Session`, as TensorFlow's own timeline
does). Matmul-type ops are summed in `matmul_share`.

    .venv/bin/python benchmarks/experiments/encode_profile.py [--quick] [--repeats N] [--shape mpnet]
"""

import collections
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common  # noqa: E402
import fetch_mpnet  # noqa: E402

common.silence_tensorflow()

NAME = "encode_profile"
BATCH_SIZE = 32
TOP_OPS = 8


def op_shares(concrete, feed, runs):
    """`{op type: share of the summed op time}` from step stats of the frozen graph."""
    import tensorflow as tf
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    frozen = convert_variables_to_constants_v2(concrete)
    graph = tf.Graph()
    with graph.as_default():
        tf.graph_util.import_graph_def(frozen.graph.as_graph_def(), name="")
    fetches = [t.name for t in frozen.outputs]
    feeds = dict(zip([t.name for t in frozen.inputs], feed))
    options = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
    totals = collections.Counter()
    with tf.compat.v1.Session(graph=graph) as session:
        session.run(fetches, feeds)
        for _ in range(runs):
            metadata = tf.compat.v1.RunMetadata()
            session.run(fetches, feeds, options=options, run_metadata=metadata)
            for device in metadata.step_stats.dev_stats:
                for node in device.node_stats:
                    op = node.timeline_label.split("(")[0].split("=")[-1].strip()
                    totals[op or node.node_name] += node.all_end_rel_micros
    whole = sum(totals.values())
    return {op: micros / whole for op, micros in totals.most_common()}


def matmuls_only(encoder, weights):
    """`(token_ids, padding_mask)` -> the fused graph's dense layers alone, chained, on `(batch * length)` rows."""
    import tensorflow as tf

    from sbert_keras.runtime import fused_graph
    from sbert_keras.runtime import fused_support

    blocks = encoder.backbone.transformer_layers
    activations = [fused_support.block_sublayers(block).intermediate.activation for block in blocks]

    def run(token_ids, padding_mask):
        model = weights.values()
        hidden = model.token_table.shape[-1]
        x = tf.reshape(tf.gather(model.token_table, token_ids), [-1, hidden])
        for block, activation in zip(model.blocks, activations):
            qkv = fused_graph.dense(x, block.qkv)
            x = fused_graph.dense(qkv[:, :hidden], block.attention_output)
            x = fused_graph.dense(fused_graph.dense(x, block.intermediate, activation), block.output)
        return tf.cast(x, "float32")

    return run


def main():
    parser = common.base_parser(__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=30, help="timed runs per graph")
    parser.add_argument("--shape", choices=("minilm", "mpnet"), default="minilm", help="the model profiled")
    args = parser.parse_args()
    found = common.sts_dev_texts_and_model(NAME)
    if found is None:
        return 0
    texts, model_dir = found
    if args.shape == "mpnet":
        model_dir = fetch_mpnet.ensure()

    import numpy as np
    import tensorflow as tf

    common.quiet_tf_python_logs()
    from sbert_keras import SentenceEncoder
    from sbert_keras.runtime import fused_graph

    repeats = 3 if args.quick else args.repeats
    encoder = SentenceEncoder.from_preset(str(model_dir))
    ids, _ = encoder.preprocessor.tokenize(texts)
    lengths = ids.row_lengths().numpy()
    middle = np.argsort(lengths, kind="stable")[len(texts) // 2 - BATCH_SIZE // 2 :][:BATCH_SIZE]
    width = int(lengths[middle].max())
    token_ids = ids.to_tensor(0).numpy()[middle, :width].astype("int32")
    mask = (np.arange(width)[None, :] < lengths[middle, None]).astype("int32")
    feed = [token_ids, mask]
    common.emit(
        benchmark=NAME,
        kind="config",
        batch_size=BATCH_SIZE,
        width=width,
        real_tokens=int(lengths[middle].sum()),
        repeats=repeats,
    )

    spec = [tf.TensorSpec([None, None], tf.int32)] * 2

    def keras_graph(model):
        return tf.function(
            lambda t, m: model({"token_ids": t, "padding_mask": m}, training=False), input_signature=spec
        )

    engine = encoder.engine
    graphs = {
        "keras_float32": keras_graph(engine.keras_model("float32")),
        "keras_mixed_bfloat16": keras_graph(engine.keras_model("bfloat16")),
    }
    for precision in ("float32", "bfloat16", "int8"):
        forward = fused_graph.build_forward(encoder, engine.fused_weights(precision))
        graphs[f"fused_{precision}"] = tf.function(forward, input_signature=spec)
        if precision != "int8":  # XLA compiles neither oneDNN's LayerNorm nor its int8 matmul
            forward = fused_graph.build_forward(encoder, engine.fused_weights(precision), fused_norm=False)
            graphs[f"fused_{precision}_xla"] = tf.function(forward, input_signature=spec, jit_compile=True)

    graphs["matmuls_only_bfloat16"] = tf.function(
        matmuls_only(encoder, engine.fused_weights("bfloat16")), input_signature=spec
    )

    intermediate = encoder.backbone.intermediate_dim
    for m, k, n in ((2048, 2048, 2048), (token_ids.size, encoder.backbone.hidden_dim, intermediate)):
        common.emit(
            benchmark=NAME,
            kind="matmul",
            shape=[m, k, n],
            **{f"{dtype}_gflops": common.matmul_gflops(m, k, n, dtype, repeats) for dtype in ("float32", "bfloat16")},
        )

    for name, function in graphs.items():
        fields = dict(benchmark=NAME, kind="graph", graph=name, ms_per_batch=common.median_ms(function, feed, repeats))
        if not name.endswith("_xla") and not name.startswith("matmuls_only"):
            shares = op_shares(function.get_concrete_function(), feed, 3 if args.quick else 10)
            fields["matmul_share"] = sum(v for k, v in shares.items() if "MatMul" in k or "Einsum" in k)
            fields["top_ops"] = {k: round(v, 3) for k, v in list(shares.items())[:TOP_OPS]}
        common.emit(**fields)
    return 0


if __name__ == "__main__":
    sys.exit(main())
