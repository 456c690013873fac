"""XNNPACK int8 with its outlier channels split off: can int8 reach the float class (min cosine >= 0.999)?

The int8 route (`sbert_keras.runtime.routes.xnnpack`) quantizes each
matmul's activations per row; a few channels of the residual stream (and of
each feed-forward's GELU output) hold values 10-30x the rest, so they set
every row's step. This experiment runs the fused forward pass converted to
TFLite twice: as the int8 route converts it (`int8`), and with those
channels split off in the manner of LLM.int8() (`int8_outliers`): each
matmul runs `(x - x_o) @ W_main + x_o @ W_o`, where `x_o` keeps only the
outlier channels (selected by a 0/1 matrix, so the converter cannot fold
the split into the weights) and `W_main` has their rows zeroed, so the main
product's per-row range no longer contains them. The outlier channels are
the union over layers of each layer's `--global-top` largest calibrated
inputs (300 STS-B train sentences) of the query/key/value and feed-forward
input matmuls (the residual stream), and each layer's `--down-top` largest
feed-forward output inputs. The split is made by replacing
`fused_graph.dense`, the fused graph's one matmul dispatch point, while the
graph is traced for the converter.

One JSON line per variant: min and mean cosine of each text's vector to the
float32 fused graph's, how many texts fall below the float class's 0.999,
texts/s (best pass after a warm-up, batch 32, length-sorted, as `encode`
batches), and the number of outlier channels.

    .venv/bin/python benchmarks/experiments/int8_outliers.py [--shape mpnet] [--lines 500] [--passes 3]
"""

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common  # noqa: E402
import fetch_mpnet  # noqa: E402

common.silence_tensorflow()

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from sbert_keras.data import readers  # noqa: E402
from sbert_keras.encoder import SentenceEncoder  # noqa: E402
from sbert_keras.runtime import batching  # noqa: E402
from sbert_keras.runtime import fused_graph  # noqa: E402
from sbert_keras.runtime import fused_support  # noqa: E402
from sbert_keras.runtime.kernels import int8_quantization  # noqa: E402
from sbert_keras.runtime.routes import xnnpack  # noqa: E402

NAME = "int8_outliers"
BATCH = 32
RESIDUAL_ROLES = ("qkv", "intermediate")
FLOAT_GATE = 0.999  # the float class's minimum cosine


def outlier_channels(stats, global_top, down_top):
    """`{(block, role): channel indices}`: the residual stream's union set and each block's feed-forward output set."""
    residual = set()
    for block in stats:
        for role in RESIDUAL_ROLES:
            residual.update(np.argsort(-np.asarray(block[role][0]))[:global_top].tolist())
    residual = np.array(sorted(residual), "int64")
    channels = {}
    for i, block in enumerate(stats):
        for role in RESIDUAL_ROLES:
            channels[(i, role)] = residual
        channels[(i, "output")] = np.sort(np.argsort(-np.asarray(block["output"][0]))[:down_top])
    return channels


def split_dense(weights, channels):
    """A `fused_graph.dense` replacement that splits the listed channels off each matmul it knows."""
    plan = {}
    for i, block in enumerate(weights.values().blocks):
        for role in (*RESIDUAL_ROLES, "output"):
            kernel = getattr(block, role).kernel
            index = channels[(i, role)]
            select = np.zeros((kernel.shape[0], len(index)), "float32")
            select[index, np.arange(len(index))] = 1.0
            keep = np.ones(kernel.shape[0], "float32")
            keep[index] = 0.0
            plan[id(kernel)] = (tf.constant(select), tf.constant(keep[:, None]), tf.constant(index))
    plain = fused_graph.dense

    def dense(x, params, activation=None, policy=None):
        if id(params.kernel) not in plan:
            return plain(x, params, activation, policy)
        select, keep, index = plan[id(params.kernel)]
        outliers = tf.matmul(x, select)  # (rows, k): an FC the converter keeps apart from the main one
        main = tf.matmul(x - tf.matmul(outliers, select, transpose_b=True), params.kernel * keep)
        y = main + tf.matmul(outliers, tf.gather(params.kernel, index)) + params.bias
        return y if activation is None else activation(y)

    return dense


def timed_encode(run, ids, pad_id, width, passes):
    """`(vectors, best seconds)` of `passes` passes after a warm-up one."""
    out = np.zeros((int(ids.nrows()), width), "float32")
    times = []
    for _ in range(passes + 1):
        start = time.perf_counter()
        batching.run_batches(run, ids, pad_id, BATCH, out, concurrency=1)
        times.append(time.perf_counter() - start)
    return out, min(times[1:] or times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=("minilm", "mpnet"), default="minilm")
    parser.add_argument("--lines", type=int, default=500, help="STS-B dev lines (texts: both sentences of each)")
    parser.add_argument("--global-top", type=int, default=4, help="per layer, residual-stream channels in the union")
    parser.add_argument("--down-top", type=int, default=16, help="per layer, feed-forward output channels")
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="50 lines, 1 pass")
    args = parser.parse_args()
    paths = common.shared_files(NAME, "data/stsbenchmark/sts-dev.csv", "data/stsbenchmark/sts-train.csv")
    model_dir = fetch_mpnet.ensure() if args.shape == "mpnet" else common.model_path(NAME)
    if paths is None or model_dir is None:
        return
    lines, passes = (50, 1) if args.quick else (args.lines, args.passes)
    dev, train = readers.read_sts(paths[0]), readers.read_sts(paths[1])
    texts = dev.sentence_a[:lines] + dev.sentence_b[:lines]
    encoder = SentenceEncoder.from_preset(str(model_dir))
    ids, _ = encoder.preprocessor.tokenize(texts)
    pad_id = encoder.preprocessor.tokenizer.pad_token_id
    weights = fused_graph.FusedWeights(encoder.backbone, "float32")
    width = weights.values().token_table.shape[-1]
    spec = [tf.TensorSpec([None, None], tf.int32)] * 2
    reference, _ = timed_encode(tf.function(fused_graph.build_forward(encoder, weights), input_signature=spec), ids,
                                pad_id, width, 0)  # fmt: skip
    reference /= np.linalg.norm(reference, axis=1, keepdims=True)

    blocks = []
    for block in encoder.backbone.transformer_layers:
        parts = fused_support.block_sublayers(block)
        blocks.append({"qkv": parts.query, "intermediate": parts.intermediate, "output": parts.output})
    calibration = list(dict.fromkeys(train.sentence_a))[:300]
    stats = int8_quantization.calibrate(
        encoder.backbone, blocks, int8_quantization.calibration_batches(encoder.preprocessor, calibration)
    )
    channels = outlier_channels(stats, args.global_top, args.down_top)
    plain = fused_graph.dense
    for variant in ("int8", "int8_outliers"):
        fused_graph.dense = split_dense(weights, channels) if variant == "int8_outliers" else plain
        try:
            model = xnnpack.convert(xnnpack.forward_function(encoder, weights), quantize=True)
        finally:
            fused_graph.dense = plain
        runner = xnnpack.Runner(model, weights.version, weights.values().token_table)
        vectors, seconds = timed_encode(runner, ids, pad_id, width, passes)
        cosines = (vectors / np.linalg.norm(vectors, axis=1, keepdims=True) * reference).sum(axis=1)
        common.emit(
            benchmark=NAME,
            model=args.shape,
            variant=variant,
            texts=len(texts),
            min_cos=round(float(cosines.min()), 6),
            mean_cos=round(float(cosines.mean()), 7),
            below_float_gate=int(np.sum(cosines < FLOAT_GATE)),
            texts_per_s=round(len(texts) / seconds, 1),
            residual_channels=len(channels[(0, "qkv")]) if variant == "int8_outliers" else 0,
            down_channels=args.down_top if variant == "int8_outliers" else 0,
        )


if __name__ == "__main__":
    main()
