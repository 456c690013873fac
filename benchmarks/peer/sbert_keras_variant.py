"""Our side of `encode_peers.py`: one sbert_keras variant, timed in its own process.

Usage (with OUR venv, not a peer's):
    sbert_keras_variant.py --variant V --texts FILE.json --out FILE.npy --work DIR
        [--model DIR] [--passes 3] [--queries FILE.json] [--request-batches]

It lives beside the peer scripts because it follows the same protocol
(`peer_common.variant_parser` / `run_variant`: one JSON line, embeddings
saved to --out), so both sides are timed by the same code. Variants:
  encode_float32, encode_bfloat16, encode_int8, encode_auto
      `SentenceEncoder.from_preset(model).encode(texts, batch_size=32, compute=P)`;
      a compute path the library refuses (ValueError/TypeError on a probe)
      prints `{"skipped": reason}`;
  keras_int8   `encoder.quantize("int8")` (the Keras API), then `encode(texts)`;
  predict      `encoder.predict(np.array(texts), batch_size=32)`;
  export_P     `export_saved_model(encoder, --work/saved_model_P, overwrite=True[, compute=P])`
               (P = default: no compute argument; P = keras_int8:
               `encoder.quantize("int8")` first, then no compute argument);
               reports the export time;
  flops        no timing of an encoder: the FLOPs of a BERT forward over the
               texts' real tokens (`encode_throughput.FlopModel`), and the GFLOP/s
               of bare matmuls (float32, bfloat16, int8 -> int32 BatchMatMulV3:
               the op Keras's int8 Dense runs; xnnpack_int8 and xnnpack_float32:
               dynamic-range int8 and float32 through TFLite's XNNPACK, what
               `encode` int8 runs, and float32 on an AVX2-only CPU; onednn_int8:
               oneDNN's `_QuantizedMatMul`, the fused graph's int8) at the shape of
               the model's feed-forward (448 x hidden @ hidden x intermediate:
               448x384x1536 for MiniLM, 448x768x3072 at base size) and at 2048^3;
  serve_P      in a fresh process, `tf.saved_model.load` of that folder and its
               `serving_default(text=...)`: one request of all texts, single
               queries, and request-order batches of 32. sbert_keras is not
               imported (a server does not have it); tensorflow_text is, for
               the tokenizer's ops.
A variant whose probe rate (64 texts after the warm-up) says one pass would
take longer than --max-pass-seconds is skipped with that rate. Warnings
raised by the library (for instance a fast path falling back) are reported.
"""

import os
import sys
import time
import warnings
from pathlib import Path

import peer_common

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common  # noqa: E402

common.silence_tensorflow()

import encode_throughput  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

ENCODE = ("encode_float32", "encode_bfloat16", "encode_int8", "encode_auto")
SAVED_MODEL_PRECISIONS = ("default", "float32", "bfloat16", "auto", "keras_int8")
VARIANTS = (
    *ENCODE,
    "keras_int8",
    "predict",
    "flops",
    *(f"{step}_{p}" for step in ("export", "serve") for p in SAVED_MODEL_PRECISIONS),
)
PROBE_TEXTS = 64


def skip(args, reason, **fields):
    peer_common.emit(engine="sbert_keras", variant=args.variant, skipped=reason, **fields)
    return 0


def saved_model_dir(args):
    return Path(args.work) / f"saved_model_{args.variant.split('_', 1)[1]}"


def load_encoder(args):
    common.quiet_tf_python_logs()
    from sbert_keras import SentenceEncoder
    from sbert_keras.utils import hardware

    if os.environ.get(peer_common.EMULATE_AVX2_ENV):  # the library reads the emulated CPU's flags
        hardware.cpu_flags = lambda: frozenset(peer_common.cpu_flags())

    model_dir = args.model or str(common.model_path("encode_peers"))
    return SentenceEncoder.from_preset(model_dir)


def encode_function(args, encoder):
    """`(encode(texts) -> array, info)` for an encode/keras_int8/predict variant, or a skip reason."""
    if args.variant == "predict":
        return (lambda texts: np.asarray(encoder.predict(np.array(texts), batch_size=args.batch_size, verbose=0))), {}
    kwargs = {}
    if args.variant == "keras_int8":
        try:
            encoder.quantize("int8")
        except Exception as error:  # noqa: BLE001 - any refusal is reported, not raised
            return f"encoder.quantize('int8') failed: {type(error).__name__}: {error}", {}
    else:
        kwargs["compute"] = args.variant.split("_", 1)[1]
    try:
        encoder.encode(["probe"], show_progress=False, **kwargs)
    except (ValueError, TypeError) as error:
        return f"encode refused {kwargs or 'the quantized encoder'}: {error}", {}
    return (lambda texts: encoder.encode(texts, batch_size=args.batch_size, show_progress=False, **kwargs)), kwargs


def export(args):
    from sbert_keras import export_saved_model

    encoder = load_encoder(args)
    path = saved_model_dir(args)
    precision = args.variant.split("_", 1)[1]
    kwargs = {} if precision in ("default", "keras_int8") else {"compute": precision}
    if precision == "keras_int8":
        try:
            encoder.quantize("int8")
        except Exception as error:  # noqa: BLE001 - any refusal is reported, not raised
            return skip(args, f"encoder.quantize('int8') failed: {type(error).__name__}: {error}")
    start = time.perf_counter()
    try:
        export_saved_model(encoder, str(path), overwrite=True, **kwargs)  # a later round writes it again
    except (ValueError, TypeError) as error:
        return skip(args, f"export_saved_model refused {kwargs}: {error}")
    peer_common.emit(
        engine="sbert_keras",
        variant=args.variant,
        export_seconds=time.perf_counter() - start,
        path=str(path),
        engine_plan=engine_plan(encoder, kwargs.get("compute"), method="plan"),
        **kwargs,
    )
    return 0


def serve_function(args):
    common.quiet_tf_python_logs()
    try:
        import tensorflow_text  # noqa: F401 - registers the tokenizer's ops
    except ImportError:
        pass
    path = saved_model_dir(args)
    if not (path / "saved_model.pb").is_file():
        return f"no SavedModel at {path} (its export was skipped or failed)", {}
    serve = tf.saved_model.load(str(path)).signatures["serving_default"]
    output = next(iter(serve.structured_outputs))

    def encode(texts):
        return serve(text=tf.constant(texts))[output].numpy()

    return encode, {"saved_model": str(path), "output": output, "throughput_mode": "one request holding all texts"}


def xnnpack_gflops(m, k, n, quantize, repeats=10):
    """GFLOP/s of one `(m, k) @ (k, n)` matmul as the XNNPACK routes run it: in TFLite's XNNPACK, dynamic-range
    int8 (`quantize`) or float32."""
    from sbert_keras.runtime.routes import xnnpack

    rng = np.random.default_rng(0)
    kernel = tf.constant(rng.standard_normal((k, n)).astype("float32"))
    matmul = tf.function(lambda x: tf.matmul(x, kernel), input_signature=[tf.TensorSpec([m, k], tf.float32)])
    interpreter = xnnpack.make_interpreter(xnnpack.convert(matmul, quantize))
    interpreter.allocate_tensors()
    interpreter.set_tensor(interpreter.get_input_details()[0]["index"], rng.standard_normal((m, k)).astype("float32"))
    times = []
    for _ in range(repeats + 2):  # the first two calls warm up
        start = time.perf_counter()
        interpreter.invoke()
        times.append(time.perf_counter() - start)
    return 2.0 * m * k * n / float(np.median(times[2:])) / 1e9


def onednn_int8_gflops(m, k, n, repeats=10):
    """GFLOP/s of one `(m, k) @ (k, n)` matmul through oneDNN's `_QuantizedMatMul` as the fused graph's int8
    route runs it (per-row uint8 activations), also where that kernel saturates (its speed only)."""
    from sbert_keras.runtime.kernels import int8_quantization
    from sbert_keras.runtime.kernels import onednn_int8

    rng = np.random.default_rng(0)
    kernel = rng.standard_normal((k, n)).astype("float32")
    weights = int8_quantization.quantize_dense(kernel, np.zeros(n, "float32"), mode="row")
    policy = onednn_int8.MatmulPolicy(constant_weights=True)
    dense = tf.function(lambda x: onednn_int8.int8_dense(x, weights, policy=policy))
    x = tf.constant(rng.standard_normal((m, k)).astype("float32"))
    return 2.0 * m * k * n / common.median_ms(dense, (x,), repeats) / 1e6


def onednn_bf16_gflops(m, k, n, repeats=10):
    """GFLOP/s of one `(m, k) @ (k, n)` bf16 matmul with bias whose weights oneDNN keeps in its layout, as the
    fused graph's bf16 route runs it (`onednn_matmul.constant_dense`); None where that op is not used here."""
    from sbert_keras.runtime.kernels import onednn_matmul

    if not onednn_matmul.constant_matmul_available():
        return None
    rng = np.random.default_rng(0)
    kernel = tf.Variable(tf.cast(rng.standard_normal((k, n)), tf.bfloat16))
    bias = tf.Variable(tf.zeros([n], tf.bfloat16))
    dense = tf.function(lambda x: onednn_matmul.constant_dense(x, kernel, bias))
    x = tf.cast(rng.standard_normal((m, k)), tf.bfloat16)
    return 2.0 * m * k * n / common.median_ms(dense, (x,), repeats) / 1e6


def flops(args):
    """Prints the useful FLOPs of the texts and the bare-matmul GFLOP/s per precision."""
    encoder = load_encoder(args)
    ids, _ = encoder.preprocessor.tokenize(peer_common.read_texts(args.texts))
    model = encode_throughput.FlopModel(encoder.backbone)
    useful = sum(model.sequence(int(n)) for n in ids.row_lengths().numpy())
    int8_matmul = tf.function(lambda a, b: tf.raw_ops.BatchMatMulV3(x=a, y=b, Tout=tf.int32))
    peaks = {}
    ffn = (448, encoder.backbone.hidden_dim, encoder.backbone.intermediate_dim)
    for m, k, n in (ffn, (2048, 2048, 2048)):
        shape = f"{m}x{k}x{n}"
        for dtype in ("float32", "bfloat16"):
            peaks[f"{dtype}_{shape}"] = common.matmul_gflops(m, k, n, dtype, repeats=10)
        a = tf.cast(tf.random.uniform([m, k], -127, 128, tf.int32), tf.int8)
        b = tf.cast(tf.random.uniform([k, n], -127, 128, tf.int32), tf.int8)
        peaks[f"int8_{shape}"] = 2.0 * m * k * n / common.median_ms(int8_matmul, (a, b), 10) / 1e6
        peaks[f"xnnpack_int8_{shape}"] = xnnpack_gflops(m, k, n, quantize=True)
        peaks[f"xnnpack_float32_{shape}"] = xnnpack_gflops(m, k, n, quantize=False)
        peaks[f"onednn_int8_{shape}"] = onednn_int8_gflops(m, k, n)
        kept = onednn_bf16_gflops(m, k, n)
        if kept is not None:
            peaks[f"onednn_bfloat16_{shape}"] = kept
    peer_common.emit(
        engine="sbert_keras",
        variant="flops",
        useful_gflop=useful / 1e9,
        matmul_gflops=peaks,
        ffn_shape="x".join(map(str, ffn)),
        flop_model=encode_throughput.FlopModel.__doc__.split("\n")[0],
    )
    return 0


def engine_plan(encoder, precision, method="route"):
    """`[route, precision]` that the library's inference engine chose, where it has one.

    `method` "route" is `encode`'s choice, "plan" a SavedModel's.
    """
    engine = getattr(encoder, "engine", None)
    plan = getattr(engine, method, None) or getattr(engine, "plan", None)
    if plan is None:
        return None
    try:
        return list(plan(precision or "auto"))
    except Exception as error:  # noqa: BLE001 - a report, never a failure
        return f"{type(error).__name__}: {error}"


def probe_rate(encode, texts):
    encode(texts[:PROBE_TEXTS])
    start = time.perf_counter()
    encode(texts[:PROBE_TEXTS])
    return PROBE_TEXTS / (time.perf_counter() - start)


def main():
    parser = peer_common.variant_parser(__doc__.splitlines()[0], VARIANTS)
    parser.add_argument(
        "--max-pass-seconds", type=float, default=90.0, help="skip a variant whose probe says a pass takes longer"
    )
    args = parser.parse_args()
    if args.variant.startswith("export_"):
        return export(args)
    if args.variant == "flops":
        return flops(args)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        encoder = None
        if args.variant.startswith("serve_"):
            encode, info = serve_function(args)
        else:
            encoder = load_encoder(args)
            encode, info = encode_function(args, encoder)
        if isinstance(encode, str):
            return skip(args, encode)
        texts = peer_common.read_texts(args.texts)
        rate = probe_rate(encode, texts)
        if len(texts) / rate > args.max_pass_seconds:
            return skip(
                args,
                f"too slow: {rate:.1f} texts/s on a {PROBE_TEXTS}-text probe, "
                f"a pass would take > {args.max_pass_seconds:.0f} s",
                probe_texts_per_second=rate,
            )

        def warning_messages():
            unique = dict.fromkeys(f"{w.category.__name__}: {w.message}"[:300] for w in caught)
            plan = encoder is not None and engine_plan(encoder, info.get("compute"))
            return {"warnings": list(unique)[:5], **({"engine_plan": plan} if plan else {})}

        peer_common.run_variant(
            args,
            "sbert_keras",
            encode,
            late=warning_messages,
            **info,
            versions=peer_common.package_versions("tensorflow", "keras", "keras-hub", "tensorflow-text"),
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
