"""A/B of `encode`'s routes on this CPU: the fused graph in float32, XNNPACK float32, XNNPACK int8; single queries.

Three inference engines of one all-MiniLM-L6-v2 encoder in one process,
each on a `hardware.Host` that makes the engine pick one route for batches
(the engine reads the machine only through its host; the kernels that run
are this CPU's):

- "fused_float32": this CPU's flags without FMA, so no XNNPACK route is
  usable and float32 batches run the fused TensorFlow graph;
- "xnnpack_float32": this CPU's flags without AVX-512, so float32 batches
  run the `xnnpack_float32` route (on an AVX-512 CPU the engine sends it
  one text only; XNNPACK picks its AVX-512 kernels itself);
- "xnnpack_int8": this CPU's flags and `avx_vnni`, so `compute="int8"` runs
  the `xnnpack` route on any CPU (without VNNI XNNPACK picks its AVX2 int8
  kernels itself).

Their passes over the STS-B dev sentences (batch 32) are interleaved after a
warm-up (which converts and checks the XNNPACK models), each inside a
`cpu_timing.CpuMonitor`. Printed: the route each engine ran, texts/s of
every pass and the best, and the XNNPACK vectors against the fused
graph's (max |diff| for float32, min cosine for int8).

`--onednn-int8` adds a fourth variant: the fused graph with oneDNN's int8
matmuls (`_QuantizedMatMul`, the `fused` route's int8) forced on, also
where `onednn_int8.int8_matmul_available` turns them off because the
kernel sums in saturating int16 (no VNNI): its speed, and its min cosine,
which shows what that saturation costs. `--onednn-weight-levels 64` quantizes
that variant's weights to 64 levels each side (7 bits), so that no uint8
x int8 pair sum leaves int16 and the kernel is exact: its min cosine is
then what 7-bit weights cost.

Then single queries in float32 (`kind: "query"`): the first `--queries`
dev sentences, each sent alone (and with `--few 4,32` as many calls of 4
and of 32 texts; the median padded tokens of a call, texts times padded
length, is reported) to the runner of the fused graph, of the
XLA query and of XNNPACK float32 (the three routes `compute="auto"` races
for one text), and of the fused graph in bfloat16 where the CPU has
AVX512-BF16 or AMX (the path `"auto"` takes there), interleaved, median
and p90 in ms.

With `--shapes 1x16,4x64`, calls of that many rows of that many tokens
(`kind: "shape"`) through XNNPACK's float32 interpreter and the fused
graph's batch call (bf16 and float32), interleaved: where XNNPACK stops
leading, by the call's padded tokens.

    .venv/bin/python benchmarks/experiments/xnnpack_avx2.py [--passes 2] [--queries 200] [--few 4,32] \
        [--shapes 1x16,4x16] [--model FOLDER] [--onednn-int8] [--onednn-weight-levels 64] [--quick]
"""

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common  # noqa: E402
import cpu_timing  # noqa: E402

common.silence_tensorflow()

NAME = "xnnpack_avx2"


def query_latencies(engine, texts, monitor, per_call=1):
    """`{route: [ms per call]}` of the float32 routes that serve one text, interleaved call by call.

    `per_call`: texts in each query call (`texts` taken `per_call` at a time); for more than one,
    the XLA query's runner runs the fused graph.
    """
    names = ("fused", "xla", "xnnpack_float32")
    assert all(engine.choice.passes(name, "float32") for name in names)  # each checked, as before it serves
    runners = {name: engine.routes[name].build("float32") for name in names}
    if engine.host.bf16 and engine.choice.passes("fused", "bfloat16"):
        runners["fused_bfloat16"] = engine.routes["fused"].build("bfloat16")
    calls = [texts[i : i + per_call] for i in range(0, len(texts) - per_call + 1, per_call)]
    for runner in runners.values():
        for call in calls[:5]:  # warm-up: compiles XLA's buckets, builds the tokeniser graphs
            runner.query(call)
    times = {name: [] for name in runners}
    with monitor:
        for call in calls:
            for name, runner in runners.items():
                start = time.perf_counter()
                runner.query(call)
                times[name].append(1000 * (time.perf_counter() - start))
    return times


def shape_latencies(engine, shapes, monitor, repeats=20):
    """`{(rows, length): {engine: median ms}}`: XNNPACK's float32 interpreter against the fused graph's batch call.

    One call of `rows` texts of `length` tokens each (a repeated id, no
    padding), the engines interleaved call by call after three warm-up calls:
    where they cross is a function of `rows * length`, which is what
    `XnnpackFloat32Route.token_steps` races on an AVX-512 CPU.
    """
    import numpy as np

    runs = {"xnnpack_float32": engine.routes["xnnpack_float32"].runner()}
    for precision in ("bfloat16", "float32") if engine.host.bf16 else ("float32",):
        runs[f"fused_{precision}"] = engine.graphs.fused_function(precision)
    medians = {}
    with monitor:
        for rows, length in shapes:
            token_ids = np.full((rows, length), 1000, "int32")
            mask = np.ones_like(token_ids)
            times = {name: [] for name in runs}
            for i in range(3 + repeats):
                for name, run in runs.items():
                    start = time.perf_counter()
                    np.asarray(run(token_ids, mask))
                    if i >= 3:
                        times[name].append(1000 * (time.perf_counter() - start))
            medians[rows, length] = {name: round(float(np.median(ms)), 2) for name, ms in times.items()}
    return medians


def engines(model_dir):
    """`{variant: (InferenceEngine, compute)}` of one encoder, each on the host that picks its route."""
    from sbert_keras import SentenceEncoder
    from sbert_keras.runtime.engine import InferenceEngine
    from sbert_keras.utils import hardware

    encoder = SentenceEncoder.from_preset(str(model_dir))
    flags = hardware.current_host().cpu_flags
    hosts = {
        "fused_float32": (hardware.Host(flags - {"fma"}), "float32"),
        "xnnpack_float32": (hardware.Host(flags - {"avx512f"}), "float32"),
        "xnnpack_int8": (hardware.Host(flags | {"avx_vnni"}), "int8"),
    }
    return {name: (InferenceEngine(encoder, host), compute) for name, (host, compute) in hosts.items()}


def forced_onednn_int8(engine, levels=127):
    """`encode(texts) -> vectors` of the fused graph whose int8 matmuls run oneDNN's op whatever the CPU.

    `levels`: the weights' largest integer (127: int8 as the route has it).
    """
    from unittest import mock

    import numpy as np

    from sbert_keras.runtime import batching
    from sbert_keras.runtime import fused_graph
    from sbert_keras.runtime.kernels import int8_quantization
    from sbert_keras.runtime.kernels import onednn_int8
    from sbert_keras.utils.backends import tensorflow as tf

    def quantize_kernel(kernel):  # `int8_quantization.quantize_kernel` with `levels` steps each side
        kernel = tf.cast(kernel, "float32")
        kernel_range = tf.reduce_max(tf.abs(kernel), axis=0) + 1e-7
        q = tf.clip_by_value(tf.round(kernel * (levels / kernel_range)), -levels, levels)
        return tf.cast(q, "int8"), kernel_range * (127.0 / levels)

    encoder = engine.encoder
    with mock.patch.object(int8_quantization, "quantize_kernel", quantize_kernel):
        weights = fused_graph.FusedWeights(encoder.backbone, "int8")
    policy = onednn_int8.MatmulPolicy(constant_weights=True)
    forward = tf.function(fused_graph.build_forward(encoder, weights, matmul_policy=policy), reduce_retracing=True)

    def encode(texts):
        rows, _ = encoder.preprocessor.tokenize(list(texts))
        out = np.zeros((len(texts), encoder.embedding_dim), "float32")
        batching.run_batches(forward, rows, encoder.preprocessor.tokenizer.pad_token_id, 32, out)
        return out

    return encode


def main():
    parser = common.base_parser(__doc__.splitlines()[0])
    parser.add_argument("--passes", type=int, default=2, help="interleaved passes per variant")
    parser.add_argument("--queries", type=int, default=200, help="single queries per route (0: none)")
    parser.add_argument(
        "--few", default="", help="comma-separated texts per query call to time too, e.g. 2,4,32 (that many calls)"
    )
    parser.add_argument(
        "--shapes", default="", help="comma-separated calls of ROWSxLENGTH tokens to time, e.g. 1x16,4x16,32x16"
    )
    parser.add_argument("--model", default=None, help="a model folder (default: all-MiniLM-L6-v2)")
    parser.add_argument("--onednn-int8", action="store_true", help="add the fused graph with oneDNN int8 forced on")
    parser.add_argument("--onednn-weight-levels", type=int, default=127, help="its weights' largest integer")
    args = parser.parse_args()
    found = common.sts_dev_texts_and_model(NAME, lines=100 if args.quick else None)
    if found is None:
        return 0
    texts, model_dir = found
    model_dir = args.model or model_dir
    import numpy as np

    common.quiet_tf_python_logs()
    runs = engines(model_dir)
    for engine, compute in runs.values():
        engine.encode(texts[:300], 32, show_progress=False, compute=compute)
    encoders = {
        name: (lambda batch, engine=engine, compute=compute: engine.encode(batch, 32, False, compute)[0])
        for name, (engine, compute) in runs.items()
    }
    routes = {name: list(engine.route(compute)) for name, (engine, compute) in runs.items()}
    if args.onednn_int8:
        encoders["onednn_int8_forced"] = forced_onednn_int8(runs["fused_float32"][0], args.onednn_weight_levels)
        encoders["onednn_int8_forced"](texts[:300])
        levels = args.onednn_weight_levels
        routes["onednn_int8_forced"] = ["fused", f"int8 (oneDNN's op forced on, weights to ±{levels})"]
    rates, vectors = {name: [] for name in encoders}, {}
    monitor = cpu_timing.CpuMonitor()
    for _ in range(1 if args.quick else args.passes):
        for name, run in encoders.items():
            vectors[name], timing = cpu_timing.timed_passes(run, texts, 1, monitor, warmup_texts=8)
            rates[name].append(round(timing["texts_per_second"], 1))
    for name in encoders:
        common.emit(
            benchmark=NAME,
            variant=name,
            route=routes[name],
            texts=len(texts),
            texts_per_second_passes=rates[name],
            texts_per_second_best=max(rates[name]),
        )
    reference = vectors["fused_float32"]

    def min_cosine(name):
        vector = vectors[name]
        return float(
            ((vector * reference).sum(1) / np.linalg.norm(vector, axis=1) / np.linalg.norm(reference, axis=1)).min()
        )

    forced = {"onednn_int8_forced_min_cosine": min_cosine("onednn_int8_forced")} if args.onednn_int8 else {}
    common.emit(
        benchmark=NAME,
        kind="summary",
        float32_max_abs_diff=float(np.abs(vectors["xnnpack_float32"] - reference).max()),
        int8_min_cosine=min_cosine("xnnpack_int8"),
        **forced,
        cpu=sorted(cpu_timing.cpu_flags() & {"avx2", "fma", "avx512f", "avx512_vnni", "amx_int8"}),
        **monitor.report(),
    )
    if args.queries:
        engine = runs["xnnpack_float32"][0]
        monitor = cpu_timing.CpuMonitor()
        for per_call in [1] + [int(n) for n in args.few.split(",") if n]:
            queries = (20 if args.quick else args.queries) * per_call
            times = query_latencies(engine, texts[:queries], monitor, per_call)
            lengths = engine.encoder.preprocessor.tokenize(texts[:queries])[0].row_lengths().numpy()
            starts = range(0, len(lengths) - per_call + 1, per_call)  # the calls `query_latencies` made
            padded = [per_call * int(lengths[i : i + per_call].max()) for i in starts]
            for name, ms in times.items():
                common.emit(
                    benchmark=NAME,
                    kind="query",
                    route=name,
                    texts_per_call=per_call,
                    median_padded_tokens=int(np.median(padded)),
                    queries=len(ms),
                    median_ms=round(float(np.median(ms)), 2),
                    p90_ms=round(float(np.percentile(ms, 90)), 2),
                )
        auto = engine.select("auto", "one")[0].name  # the races of the routes above, run now
        common.emit(benchmark=NAME, kind="query_summary", auto_one=auto, **monitor.report())
    if args.shapes:
        shapes = [tuple(int(n) for n in shape.split("x")) for shape in args.shapes.split(",")]
        monitor = cpu_timing.CpuMonitor()
        medians = shape_latencies(runs["xnnpack_float32"][0], shapes, monitor, 5 if args.quick else 20)
        for (rows, length), ms in medians.items():
            common.emit(benchmark=NAME, kind="shape", rows=rows, length=length, tokens=rows * length, median_ms=ms)
        common.emit(benchmark=NAME, kind="shape_summary", **monitor.report())
    return 0


if __name__ == "__main__":
    sys.exit(main())
