"""int8 recipes on all-MiniLM-L6-v2: accuracy (min cosine, STS-B dev Spearman) and speed.

Runs the 3,000 STS-B dev sentences (batch 32, length-sorted batches padded
to their longest text, as `encode` does) through a copy of the fused
forward pass whose matmuls are, per recipe, bf16 or int8
(`sbert_keras.runtime.kernels.onednn_int8.int8_dense`) with dynamic or calibrated (300 STS-B train
sentences) activation ranges. Prints one JSON line per recipe: min and mean
cosine to float32, dev Spearman, texts/s, and the bf16 fused pass measured
in the same run.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/experiments/int8_experiment.py [--quick] [--recipes a,b]
"""

import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common  # noqa: E402

common.silence_tensorflow()

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from scipy import stats  # noqa: E402

from sbert_keras.data import readers  # noqa: E402
from sbert_keras.encoder import SentenceEncoder  # noqa: E402
from sbert_keras.runtime.kernels import int8_quantization  # noqa: E402
from sbert_keras.runtime.kernels import onednn_int8  # noqa: E402

NAME = "int8_experiment"
BATCH = 32
KINDS = ("qkv", "attention_output", "intermediate", "output")
# recipe -> {kind: "bf16" | (mode, alpha)}: mode of `int8_quantization.quantize_dense`, SmoothQuant alpha.


def _all(mode, alpha=None, **overrides):
    recipe = dict.fromkeys(KINDS, (mode, alpha))
    recipe.update(overrides)
    return recipe


RECIPES = {
    "bf16": dict.fromkeys(KINDS, "bf16"),
    "dynamic": _all("dynamic"),
    "static": _all("static"),
    "token": _all("token"),
    "row": _all("row"),
    **{f"only_{k}": {**dict.fromkeys(KINDS, "bf16"), k: ("dynamic", None)} for k in KINDS},
    "dynamic_sq50": _all("dynamic", 0.5),
    "static_sq50": _all("static", 0.5),
    "token_sq50": _all("token", 0.5),
    "static_sq50_out_token": _all("static", 0.5, output=("token", 0.5)),
    "static_sq50_out_bf16": _all("static", 0.5, output="bf16"),
    "dynamic_sq50_out_bf16": _all("dynamic", 0.5, output="bf16"),
    "static_sq75": _all("static", 0.75),
    "static_ol": _all("static", "outliers"),
    "dynamic_ol": _all("dynamic", "outliers"),
    "static_ol_out_u8": _all("static", "outliers", output=("static_u8", "outliers")),
    "static_sq50_out_u8ol": _all("static", 0.5, output=("static_u8", "outliers")),
    "static_sq50_out_ol": _all("static", 0.5, output=("static", "outliers")),
    "dynamic_sq50_out_dynol": _all("dynamic", 0.5, output=("dynamic", "outliers")),
    "static_sq50_out_u8": _all("static", 0.5, output=("static_u8", None)),
    "static_sq50_out_u8sq50": _all("static", 0.5, output=("static_u8", 0.5)),
    "static_sq50_out_u8sq25": _all("static", 0.5, output=("static_u8", 0.25)),
    "static_sq50_out_static": _all("static", 0.5, output=("static", None)),
    "static_sq50_out_token0": _all("static", 0.5, output=("token", None)),
    "static_u8out_only": {**dict.fromkeys(KINDS, "bf16"), "output": ("static_u8", None)},
    "token_out_only": {**dict.fromkeys(KINDS, "bf16"), "output": ("token", None)},
    "dynamic_sq75": _all("dynamic", 0.75),
}


def layer_weights(backbone, calibration=None):
    """Per block: {kind: (float kernel (in, out), bias)} from the backbone's float weights."""
    blocks = []
    for layer in backbone.transformer_layers:
        att = layer._self_attention_layer
        hidden = att._query_dense.kernel.shape[0]
        qkv = (att._query_dense, att._key_dense, att._value_dense)
        blocks.append(
            {
                "qkv": (
                    np.concatenate([np.reshape(d.kernel.numpy(), [hidden, -1]) for d in qkv], 1),
                    np.concatenate([np.reshape(d.bias.numpy(), [-1]) for d in qkv]),
                ),
                "attention_output": (
                    np.reshape(att._output_dense.kernel.numpy(), [-1, hidden]),
                    att._output_dense.bias.numpy(),
                ),
                "intermediate": (
                    layer._feedforward_intermediate_dense.kernel.numpy(),
                    layer._feedforward_intermediate_dense.bias.numpy(),
                ),
                "output": (
                    layer._feedforward_output_dense.kernel.numpy(),
                    layer._feedforward_output_dense.bias.numpy(),
                ),
            }
        )
    return blocks


def keras_int8_blocks(backbone):
    """Per block: {kind: (q, kernel_range, bias)} read from Keras int8-quantized layers."""
    blocks = []
    for layer in backbone.transformer_layers:
        att = layer._self_attention_layer
        qkv = [int8_quantization.keras_int8_kernel(d) for d in (att._query_dense, att._key_dense, att._value_dense)]
        qkv_bias = np.concatenate(
            [np.reshape(d.bias.numpy(), [-1]) for d in (att._query_dense, att._key_dense, att._value_dense)]
        )
        blocks.append(
            {
                "qkv": (np.concatenate([q for q, _ in qkv], 1), np.concatenate([r for _, r in qkv]), qkv_bias),
                "attention_output": (
                    *int8_quantization.keras_int8_kernel(att._output_dense),
                    att._output_dense.bias.numpy(),
                ),
                "intermediate": (
                    *int8_quantization.keras_int8_kernel(layer._feedforward_intermediate_dense),
                    layer._feedforward_intermediate_dense.bias.numpy(),
                ),
                "output": (
                    *int8_quantization.keras_int8_kernel(layer._feedforward_output_dense),
                    layer._feedforward_output_dense.bias.numpy(),
                ),
            }
        )
    return blocks


def keras_recipe_weights(blocks, mode):
    return [{k: onednn_int8.make_weights(q, r, b, mode) for k, (q, r, b) in block.items()} for block in blocks]


def recipe_weights(blocks, recipe, channel_max=None):
    out = []
    for i, block in enumerate(blocks):
        entry = {}
        for kind, (kernel, bias) in block.items():
            spec = recipe[kind]
            if spec in ("bf16", "float32"):
                dtype = "bfloat16" if spec == "bf16" else "float32"
                entry[kind] = (tf.constant(kernel, dtype), tf.constant(bias, dtype))
            else:
                mode, alpha = spec
                input_max, input_min = (None, None) if channel_max is None else channel_max[i][kind]
                entry[kind] = int8_quantization.quantize_dense(
                    kernel,
                    bias,
                    mode,
                    input_max,
                    alpha,
                    input_min=float(np.min(input_min)) if input_min is not None else None,
                )
        out.append(entry)
    return out


def dense(x, w, activation=None):
    if isinstance(w, onednn_int8.INT8_WEIGHT_TYPES):
        return onednn_int8.int8_dense(x, w, activation)
    kernel, bias = w
    y = tf.cast(tf.nn.bias_add(tf.matmul(tf.cast(x, kernel.dtype), kernel), bias), "float32")
    return y if activation is None else activation(y)


def build_forward(encoder):
    backbone = encoder.backbone
    layers = backbone.transformer_layers
    heads = backbone.num_heads
    eps = [backbone.embeddings_layer_norm.epsilon] + [
        (layer._self_attention_layer_norm.epsilon, layer._feedforward_layer_norm.epsilon) for layer in layers
    ]
    acts = [layer._feedforward_intermediate_dense.activation for layer in layers]
    norms = [(layer._self_attention_layer_norm, layer._feedforward_layer_norm) for layer in layers]
    emb = backbone.embeddings
    token_table = tf.constant(emb.token_embedding.embeddings.numpy())
    position_table = tf.constant(emb.position_embedding.position_embeddings.numpy())
    en = backbone.embeddings_layer_norm
    pooling = encoder.pooling_layer

    def ln(x, layer, epsilon):
        mean, var = tf.nn.moments(x, axes=[-1], keepdims=True)
        return tf.nn.batch_normalization(x, mean, var, layer.beta, layer.gamma, epsilon)

    def forward(token_ids, mask, weights):
        def d(x, w, kind, act=None):
            return dense(x, w, act)

        batch, length = tf.shape(token_ids)[0], tf.shape(token_ids)[1]
        hidden = token_table.shape[-1]
        hd = hidden // heads
        x = tf.gather(token_table, token_ids) + position_table[None, :length]
        x = tf.reshape(ln(x, en, eps[0]), [-1, hidden])
        bias = ((1.0 - tf.cast(mask, "float32")) * -1e9)[:, None, None, :]
        for i, w in enumerate(weights):
            qkv = d(x, w["qkv"], "qkv")
            qkv = tf.transpose(tf.reshape(qkv, [batch, length, 3, heads, hd]), [2, 0, 3, 1, 4])
            s = tf.matmul(qkv[0] * (1.0 / math.sqrt(hd)), qkv[1], transpose_b=True)
            c = tf.matmul(tf.nn.softmax(s + bias), qkv[2])
            c = tf.reshape(tf.transpose(c, [0, 2, 1, 3]), [-1, hidden])
            x = ln(d(c, w["attention_output"], "attention_output") + x, norms[i][0], eps[i + 1][0])
            h = d(x, w["intermediate"], "intermediate", acts[i])
            x = ln(d(h, w["output"], "output") + x, norms[i][1], eps[i + 1][1])
        pooled = pooling(tf.reshape(x, [batch, length, hidden]), mask)
        return pooled

    return tf.function(forward)


def batches(encoder, texts):
    ids, _ = encoder.preprocessor.tokenize(texts)
    lengths = ids.row_lengths().numpy()
    order = np.argsort(-lengths, kind="stable")
    flat = ids.to_tensor(encoder.preprocessor.tokenizer.pad_token_id).numpy()
    out = []
    for s in range(0, len(texts), BATCH):
        idx = order[s : s + BATCH]
        width = int(lengths[idx].max())
        out.append(
            (
                idx,
                tf.constant(flat[idx, :width], tf.int32),
                tf.constant((np.arange(width)[None] < lengths[idx, None]).astype("int32")),
            )
        )
    return out


def run(forward, prepared, weights, n):
    out = None
    for idx, ids, mask in prepared:
        y = forward(ids, mask, weights).numpy()
        if out is None:
            out = np.empty((n, y.shape[1]), "float32")
        out[idx] = y
    return out


def timed(forward, prepared, weights, n):
    t = time.perf_counter()
    run(forward, prepared, weights, n)
    return time.perf_counter() - t


def main():
    parser = common.base_parser(__doc__.splitlines()[0])
    parser.add_argument("--recipes", default=",".join(RECIPES))
    parser.add_argument("--repeats", type=int, default=3, help="interleaved timing rounds")
    parser.add_argument(
        "--calibration",
        choices=("sts-train", "builtin"),
        default="sts-train",
        help="300 STS-B train sentences, or int8_quantize.CALIBRATION_SENTENCES",
    )
    parser.add_argument("--time-texts", type=int, default=1000, help="texts of each timed pass")
    parser.add_argument(
        "--keras-quantized", action="store_true", help="also run the int8 weights of encoder.quantize('int8')"
    )
    args = parser.parse_args()
    found = common.sts_dev_texts_and_model(NAME, lines=200 if args.quick else None)
    if found is None:
        return 0
    texts, model_dir = found
    common.quiet_tf_python_logs()
    dev = readers.read_sts(common.shared_dir() / "data/stsbenchmark/sts-dev.csv")
    train = readers.read_sts(common.shared_dir() / "data/stsbenchmark/sts-train.csv")
    calib_texts = (
        list(int8_quantization.CALIBRATION_SENTENCES) if args.calibration == "builtin" else train.sentence_a[:300]
    )
    encoder = SentenceEncoder.from_preset(str(model_dir))
    n = len(texts)
    half = n // 2
    labels = np.asarray(dev.labels[:half])
    reference = encoder.encode(texts, batch_size=BATCH, show_progress=False, compute="float32")
    blocks = layer_weights(encoder.backbone)
    watched = [
        {
            "qkv": b._self_attention_layer._query_dense,
            "attention_output": b._self_attention_layer._output_dense,
            "intermediate": b._feedforward_intermediate_dense,
            "output": b._feedforward_output_dense,
        }
        for b in encoder.backbone.transformer_layers
    ]
    channel_max = int8_quantization.calibrate(
        encoder.backbone, watched, int8_quantization.calibration_batches(encoder.preprocessor, calib_texts)
    )
    common.emit(
        benchmark=NAME,
        kind="config",
        texts=n,
        int8_available=onednn_int8.int8_matmul_available(),
        ranges=[{k: (float(v[0].max()), float(np.min(v[1]))) for k, v in b.items()} for b in channel_max],
    )
    prepared = batches(encoder, texts)
    forward = build_forward(encoder)

    def score(emb):
        a = emb / np.linalg.norm(emb, axis=1, keepdims=True)
        r = reference / np.linalg.norm(reference, axis=1, keepdims=True)
        cos = (a * r).sum(1)
        sims = (a[:half] * a[half:]).sum(1)
        return float(cos.min()), float(cos.mean()), float(stats.spearmanr(sims, labels)[0])

    ref_spearman = score(reference)[2]
    names = ["bf16"] + [r for r in args.recipes.split(",") if r != "bf16"]
    all_weights = {name: recipe_weights(blocks, RECIPES[name], channel_max) for name in names if name in RECIPES}
    if args.keras_quantized:
        quantized = SentenceEncoder.from_preset(str(model_dir))
        quantized.backbone.quantize("int8")
        kblocks = keras_int8_blocks(quantized.backbone)
        for mode in ("token", "dynamic"):
            all_weights[f"keras_{mode}"] = keras_recipe_weights(kblocks, mode)
            names.append(f"keras_{mode}")
    results = {}
    for name in names:
        emb = run(forward, prepared, all_weights[name], n)
        results[name] = dict(zip(("min_cos", "mean_cos", "spearman"), score(emb)))
    timing = prepared[:: max(1, len(prepared) * BATCH // args.time_texts)]
    timed_n = sum(len(idx) for idx, _, _ in timing)
    best = dict.fromkeys(names, math.inf)
    for _ in range(args.repeats):  # interleaved rounds: a busy machine slows all recipes alike
        for name in names:
            best[name] = min(best[name], timed(forward, timing, all_weights[name], n))
    for name in names:
        common.emit(
            benchmark=NAME,
            kind="recipe",
            recipe=name,
            **results[name],
            spearman_fp32=ref_spearman,
            texts_per_s=timed_n / best[name],
            vs_bf16=best["bf16"] / best[name],
            timed_texts=timed_n,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
