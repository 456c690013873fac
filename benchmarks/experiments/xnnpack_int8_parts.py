"""Where a batch's time goes in XNNPACK's int8 model at a base size, and what does not shorten it.

A BERT-base-shaped stack (12 layers, hidden 768, feed-forward 3072, 12
heads; seeded random weights) written with the ops of the fused graph
(`sbert_keras/runtime/fused_graph.py`: one query/key/value matmul, the
composite LayerNorm, exact GELU, masked mean pooling), converted as the int8
route converts (`routes.xnnpack.convert`: dynamic-range int8) once per
variant, each variant with a part taken out. The library's forward
(`fused_graph.build_forward`) has no switch that takes a part out, so the
stack is written here; its LayerNorm is the library's
(`onednn_layer_norm.composite_layer_norm`, what the int8 route converts).
The variants:

- `full`: the whole stack;
- `no_layer_norm`: every LayerNorm the identity;
- `no_attention`: attention replaced by the first third of its input;
- `matmuls_only`: the four matmuls of each layer chained, nothing else;
- `static`: `full` traced for the batch's fixed shape, so no reshape has a
  run-time shape and XNNPACK takes the graph in one partition (the
  dynamic one has two a layer);
- `latest`: `full` in an interpreter with
  `experimental_default_delegate_latest_features` (XNNPACK's newest
  operators; its C++ side prints one deprecation line on stderr).

The variants' interpreters run interleaved rounds on one batch
(`--shape`, default 32 texts of 18 tokens, near the STS-B dev median).
Printed per variant: median and best ms per batch, and the median's
share of `full`'s. It is the evidence that the int8 matmuls already run
near XNNPACK's peak (`matmuls_only`), that attention and LayerNorm take most
of the rest, and that neither one partition nor the newest operators
shorten a batch.

    .venv/bin/python benchmarks/experiments/xnnpack_int8_parts.py [--shape 32x18] [--rounds 8] [--quick]
"""

import os
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common  # noqa: E402

common.silence_tensorflow()

NAME = "xnnpack_int8_parts"
VARIANTS = ("full", "no_layer_norm", "no_attention", "matmuls_only", "static", "latest")
HIDDEN, FEEDFORWARD, HEADS = 768, 3072, 12


def stack_weights(layers, seed=0):
    """Seeded float32 weights of `layers` BERT-base-shaped layers, as numpy arrays."""
    import numpy as np

    rng = np.random.default_rng(seed)

    def normal(*shape, scale=0.03):
        return (rng.normal(size=shape) * scale).astype("float32")

    shapes = {
        "qkv": (HIDDEN, 3 * HIDDEN),
        "out": (HIDDEN, HIDDEN),
        "up": (HIDDEN, FEEDFORWARD),
        "down": (FEEDFORWARD, HIDDEN),
    }
    blocks = []
    for _ in range(layers):
        block = {name: normal(*shape) for name, shape in shapes.items()}
        block.update({f"{name}_bias": normal(shape[1]) for name, shape in shapes.items()})
        block.update(gamma=1.0 + normal(2, HIDDEN, scale=0.1), beta=normal(2, HIDDEN))
        blocks.append(block)
    return blocks


def forward_function(blocks, variant, shape):
    """The variant's `tf.function` from token embeddings `(batch, length, hidden)` and an int32 mask."""
    import tensorflow as tf

    from sbert_keras.runtime.kernels import onednn_layer_norm

    def layer_norm(x, gamma, beta):  # the int8 route's LayerNorm (`fused_norm=False`), or none
        return x if variant == "no_layer_norm" else onednn_layer_norm.composite_layer_norm(x, gamma, beta, 1e-12)

    def attend(qkv, bias, batch, length):
        if variant == "no_attention":
            return qkv[:, :HIDDEN]
        head = HIDDEN // HEADS
        qkv = tf.transpose(tf.reshape(qkv, [batch, length, 3, HEADS, head]), [2, 0, 3, 1, 4])
        q, k, v = (tf.reshape(t, [batch, HEADS, length, head]) for t in tf.split(qkv, 3, axis=0))
        context = tf.matmul(tf.nn.softmax(tf.matmul(q, k, transpose_b=True) + bias), v)
        return tf.reshape(tf.transpose(context, [0, 2, 1, 3]), [-1, HIDDEN])

    def forward(embedded, mask):
        batch, length = tf.shape(embedded)[0], tf.shape(embedded)[1]
        bias = tf.reshape((1.0 - tf.cast(mask, "float32")) * -1e9, [batch, 1, 1, length])
        x = tf.reshape(embedded, [-1, HIDDEN])
        for b in blocks:
            if variant == "matmuls_only":
                x = tf.matmul(tf.matmul(tf.matmul(x, b["qkv"])[:, :HIDDEN], b["out"]), b["up"]) @ b["down"]
                continue
            context = attend(tf.matmul(x, b["qkv"]) + b["qkv_bias"], bias, batch, length)
            x = layer_norm(tf.matmul(context, b["out"]) + b["out_bias"] + x, b["gamma"][0], b["beta"][0])
            hidden = tf.nn.gelu(tf.matmul(x, b["up"]) + b["up_bias"], approximate=False)
            x = layer_norm(tf.matmul(hidden, b["down"]) + b["down_bias"] + x, b["gamma"][1], b["beta"][1])
        weights = tf.expand_dims(tf.cast(mask, "float32"), -1)
        return tf.reduce_sum(tf.reshape(x, [batch, length, HIDDEN]) * weights, 1) / tf.reduce_sum(weights, 1)

    fixed = list(shape) if variant == "static" else [None, None]
    spec = (tf.TensorSpec(fixed + [HIDDEN], tf.float32), tf.TensorSpec(fixed, tf.int32))
    return tf.function(forward, input_signature=spec, autograph=False)


def interpreter(model, variant, inputs):
    """The variant's interpreter on this process's cores, resized and fed `inputs`, warmed up."""
    import tensorflow as tf

    from sbert_keras.runtime.routes import xnnpack

    if variant == "latest":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            run = tf.lite.Interpreter(
                model_content=model,
                num_threads=len(os.sched_getaffinity(0)),
                experimental_default_delegate_latest_features=True,
            )
    else:
        run = xnnpack.make_interpreter(model)
    details = run.get_input_details()
    for detail in details:
        run.resize_tensor_input(detail["index"], inputs[len(detail["shape"])].shape)
    run.allocate_tensors()
    for detail in details:
        run.set_tensor(detail["index"], inputs[len(detail["shape"])])
    for _ in range(3):
        run.invoke()
    return run


def main():
    parser = common.base_parser(__doc__.splitlines()[0])
    parser.add_argument("--shape", default="32x18", help="texts x tokens of the timed batch")
    parser.add_argument("--rounds", type=int, default=8, help="interleaved rounds of 4 calls per variant")
    parser.add_argument(
        "--variants", default=",".join(VARIANTS), help=f"comma-separated subset of {','.join(VARIANTS)}"
    )
    args = parser.parse_args()
    import numpy as np

    from sbert_keras.runtime.routes import xnnpack

    common.quiet_tf_python_logs()
    batch, length = (int(n) for n in args.shape.split("x"))
    layers, rounds = (2, 1) if args.quick else (12, args.rounds)
    blocks = stack_weights(layers)
    rng = np.random.default_rng(1)
    inputs = {3: rng.normal(size=(batch, length, HIDDEN)).astype("float32"), 2: np.ones((batch, length), "int32")}
    runs = {}
    for variant in args.variants.split(","):
        function = forward_function(blocks, "full" if variant == "latest" else variant, (batch, length))
        runs[variant] = interpreter(xnnpack.convert(function, quantize=True), variant, inputs)
    seconds = {variant: [] for variant in runs}
    for _ in range(rounds):
        for variant, run in runs.items():
            for _ in range(4):
                start = time.perf_counter()
                run.invoke()
                seconds[variant].append(time.perf_counter() - start)
    medians = {variant: float(np.median(times)) for variant, times in seconds.items()}
    for variant, times in seconds.items():
        partitions = sum(op["op_name"] == "DELEGATE" for op in runs[variant]._get_ops_details())
        common.emit(
            benchmark=NAME,
            variant=variant,
            layers=layers,
            shape=[batch, length],
            ms_median=round(1000 * medians[variant], 2),
            ms_best=round(1000 * min(times), 2),
            share_of_full=round(medians[variant] / medians["full"], 3) if "full" in medians else None,
            xnnpack_partitions=partitions,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
