"""How closely int8 vectors computed two ways agree: could a SavedModel serve `encode`'s int8?

TF Serving runs TensorFlow graphs, so an int8 SavedModel cannot run
`encode`'s int8 (TFLite's XNNPACK, `sbert_keras.runtime.routes.xnnpack`).
It would hold the same int8 weights and compute with TensorFlow's kernels,
in one of two ways: the fused graph's oneDNN int8 matmuls
(`sbert_keras.runtime.kernels.onednn_int8`, the same per-row activation
scales as XNNPACK's), or the int8 weights dequantized and every activation
left in float (weight-only int8, float32 or bf16 matmuls). This
experiment computes the same texts through each, beside the float32 fused
graph, and prints the agreement of every pair of variants:

- `float32`: the fused graph in float32 (the reference);
- `xnnpack_int8`: the fused graph converted as the int8 route converts it;
- `onednn_int8`: the fused graph with its int8 weights through oneDNN's
  int8 matmul (where the CPU has an exact one: VNNI or AMX);
- `weights_only_float32`, `weights_only_bfloat16`: the fused graph with its
  int8 weights dequantized to float32 or bf16;
- `xnnpack_int8_one_step`: `xnnpack_int8` itself, its token embeddings each
  moved one float32 step up (`np.nextafter`): how far float rounding
  alone moves `encode`'s int8 vectors, the floor for any other
  realization of the same int8 arithmetic.

One JSON line per pair: min, 1st percentile and mean of the cosines of
each text's two vectors. A SavedModel would have to keep a min of 0.999
with `xnnpack_int8` to stand in for `encode`'s int8. A last line
(`pair: "one dense layer"`) compares the two int8 kernels on a single
matmul (seeded random activations with an outlier channel, 384 -> 1,536,
the same int8 weights): the RMS of their difference and of each one's
error to float32, relative to the float32 output's RMS; how many int8
weights the converter rounded otherwise than Keras' rule (which the
oneDNN route's weights follow); and how many output rows differ by more
than 1e-3 of that RMS anywhere.

    .venv/bin/python benchmarks/experiments/int8_agreement.py [--shape mpnet] [--lines 500]
"""

import argparse
import itertools
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common  # noqa: E402
import fetch_mpnet  # noqa: E402

common.silence_tensorflow()

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from int8_outliers import timed_encode  # noqa: E402

from sbert_keras.data import readers  # noqa: E402
from sbert_keras.encoder import SentenceEncoder  # noqa: E402
from sbert_keras.runtime import fused_graph  # noqa: E402
from sbert_keras.runtime.kernels import int8_quantization  # noqa: E402
from sbert_keras.runtime.kernels import onednn_int8  # noqa: E402
from sbert_keras.runtime.routes import xnnpack  # noqa: E402

NAME = "int8_agreement"
SPEC = [tf.TensorSpec([None, None], tf.int32)] * 2


def unit(vectors):
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def variants(encoder, ids, pad_id):
    """`{name: unit vectors}` of every variant this CPU can run."""
    float_weights = fused_graph.FusedWeights(encoder.backbone, "float32")
    int8_weights = fused_graph.FusedWeights(encoder.backbone, "int8")
    width = float_weights.values().token_table.shape[-1]

    def graph(weights, policy=None):
        forward = fused_graph.build_forward(encoder, weights, matmul_policy=policy)
        return unit(timed_encode(tf.function(forward, input_signature=SPEC), ids, pad_id, width, 0)[0])

    out = {"float32": graph(float_weights)}
    model = xnnpack.convert(xnnpack.forward_function(encoder, float_weights), quantize=True)
    runner = xnnpack.Runner(model, float_weights.version, float_weights.values().token_table)
    out["xnnpack_int8"] = unit(timed_encode(runner, ids, pad_id, width, 0)[0])
    table = float_weights.values().token_table.numpy()
    stepped = tf.constant(np.nextafter(table, np.float32(np.inf)))
    runner = xnnpack.Runner(model, float_weights.version, stepped)
    out["xnnpack_int8_one_step"] = unit(timed_encode(runner, ids, pad_id, width, 0)[0])
    if onednn_int8.int8_matmul_available():
        out["onednn_int8"] = graph(int8_weights, onednn_int8.MatmulPolicy())
    for dtype in ("float32", "bfloat16"):
        out[f"weights_only_{dtype}"] = graph(int8_weights, onednn_int8.MatmulPolicy(int8_op=False, dtype=dtype))
    return out


def one_dense_layer(rows=64, fan_in=384, fan_out=1536, seed=0):
    """`{name: relative RMS}` of XNNPACK's and oneDNN's int8 on one matmul: each to float32, and to each other."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, fan_in)).astype("float32") + 0.3
    x[:, 5] *= 20.0  # an outlier channel, as the residual stream has
    kernel = (rng.standard_normal((fan_in, fan_out)) * 0.05).astype("float32")
    bias = (rng.standard_normal(fan_out) * 0.1).astype("float32")
    variables = tf.Variable(kernel), tf.Variable(bias)
    dense = tf.function(lambda x: tf.matmul(x, variables[0]) + variables[1], input_signature=[tf.TensorSpec(x.shape)])
    interpreter = xnnpack.make_interpreter(xnnpack.convert(dense, quantize=True))
    interpreter.allocate_tensors()
    interpreter.set_tensor(interpreter.get_input_details()[0]["index"], x)
    interpreter.invoke()
    xnnpack_y = interpreter.get_tensor(interpreter.get_output_details()[0]["index"])
    converted = [t for t in interpreter.get_tensor_details() if t["dtype"] == np.int8]  # (out, in)
    q, kernel_range = int8_quantization.quantize_kernel(kernel)
    weights = onednn_int8.make_weights(q, kernel_range, bias, mode="row")
    onednn_y = tf.function(lambda x: onednn_int8.int8_dense(x, weights))(tf.constant(x)).numpy()
    exact = x @ kernel + bias
    scale = np.sqrt(np.mean(exact**2))

    def rms(a, b):
        return round(float(np.sqrt(np.mean((a - b) ** 2)) / scale), 8)

    return {
        "xnnpack_to_float32": rms(xnnpack_y, exact),
        "onednn_to_float32": rms(onednn_y, exact),
        "xnnpack_to_onednn": rms(xnnpack_y, onednn_y),
        "weights_differing": int(np.sum(interpreter.get_tensor(converted[0]["index"]) != q.numpy().T)),
        "rows": rows,
        "rows_differing": int(np.sum(np.abs(xnnpack_y - onednn_y).max(axis=1) > 1e-3 * scale)),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=("minilm", "mpnet"), default="minilm")
    parser.add_argument("--lines", type=int, default=500, help="STS-B dev lines (texts: both sentences of each)")
    parser.add_argument("--quick", action="store_true", help="50 lines")
    args = parser.parse_args()
    paths = common.shared_files(NAME, "data/stsbenchmark/sts-dev.csv")
    model_dir = fetch_mpnet.ensure() if args.shape == "mpnet" else common.model_path(NAME)
    if paths is None or model_dir is None:
        return
    lines = 50 if args.quick else args.lines
    dev = readers.read_sts(paths[0])
    texts = dev.sentence_a[:lines] + dev.sentence_b[:lines]
    encoder = SentenceEncoder.from_preset(str(model_dir))
    ids, _ = encoder.preprocessor.tokenize(texts)
    vectors = variants(encoder, ids, encoder.preprocessor.tokenizer.pad_token_id)
    for first, second in itertools.combinations(vectors, 2):
        cosines = (vectors[first] * vectors[second]).sum(axis=1)
        common.emit(
            benchmark=NAME,
            model=args.shape,
            texts=len(texts),
            pair=f"{first} / {second}",
            min_cos=round(float(cosines.min()), 6),
            p1_cos=round(float(np.percentile(cosines, 1)), 6),
            mean_cos=round(float(cosines.mean()), 7),
        )
    if onednn_int8.int8_matmul_available():
        common.emit(benchmark=NAME, pair="one dense layer", **one_dense_layer())


if __name__ == "__main__":
    main()
