"""A/B of `encode`'s routes on this CPU: the fused graph in float32, XNNPACK float32, XNNPACK int8; single queries.

Three inference engines of one all-MiniLM-L6-v2 encoder in one process,
each on a `hardware.Host` that makes the engine pick one route for batches
(the engine reads the machine only through its host; the kernels that run
are this CPU's):

- "fused_float32": this CPU's flags without FMA, so no XNNPACK route is
  usable and float32 batches run the fused TensorFlow graph;
- "xnnpack_float32": this CPU's flags; on an AVX2 CPU without AVX-512,
  float32 batches run the `xnnpack_float32` route;
- "xnnpack_int8": this CPU's flags and `avx_vnni`, so `compute="int8"` runs
  the `xnnpack` route on any CPU (without VNNI XNNPACK picks its AVX2 int8
  kernels itself).

Their passes over the STS-B dev sentences (batch 32) are interleaved after a
warm-up (which converts and checks the XNNPACK models), each inside a
`cpu_timing.CpuMonitor`. Printed: the route each engine ran, texts/s of
every pass and the best, and the XNNPACK vectors against the fused
graph's (max |diff| for float32, min cosine for int8).

Then single queries in float32 (`kind: "query"`): the first `--queries`
dev sentences, each sent alone to the runner of the fused graph, of the
XLA query and of XNNPACK float32 (the three routes `compute="auto"` races
for one text), interleaved, median and p90 in ms.

    .venv/bin/python benchmarks/experiments/xnnpack_avx2.py [--passes 2] [--queries 200] [--model FOLDER] [--quick]
"""

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common  # noqa: E402
import cpu_timing  # noqa: E402

common.silence_tensorflow()

NAME = "xnnpack_avx2"


def query_latencies(engine, texts, monitor):
    """`{route: [ms per query]}` of the float32 routes that serve one text, interleaved text by text."""
    names = ("fused", "xla", "xnnpack_float32")
    assert all(engine.choice.passes(name, "float32") for name in names)  # each checked, as before it serves
    runners = {name: engine.routes[name].build("float32") for name in names}
    for runner in runners.values():
        for text in texts[:5]:  # warm-up: compiles XLA's buckets, builds the tokeniser graphs
            runner.query([text])
    times = {name: [] for name in runners}
    with monitor:
        for text in texts:
            for name, runner in runners.items():
                start = time.perf_counter()
                runner.query([text])
                times[name].append(1000 * (time.perf_counter() - start))
    return times


def engines(model_dir):
    """`{variant: (InferenceEngine, compute)}` of one encoder, each on the host that picks its route."""
    from sbert_keras import SentenceEncoder
    from sbert_keras.runtime.engine import InferenceEngine
    from sbert_keras.utils import hardware

    encoder = SentenceEncoder.from_preset(str(model_dir))
    flags = hardware.current_host().cpu_flags
    hosts = {
        "fused_float32": (hardware.Host(flags - {"fma"}), "float32"),
        "xnnpack_float32": (hardware.Host(flags), "float32"),
        "xnnpack_int8": (hardware.Host(flags | {"avx_vnni"}), "int8"),
    }
    return {name: (InferenceEngine(encoder, host), compute) for name, (host, compute) in hosts.items()}


def main():
    parser = common.base_parser(__doc__.splitlines()[0])
    parser.add_argument("--passes", type=int, default=2, help="interleaved passes per variant")
    parser.add_argument("--queries", type=int, default=200, help="single queries per route (0: none)")
    parser.add_argument("--model", default=None, help="a model folder (default: all-MiniLM-L6-v2)")
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
    rates, vectors = {name: [] for name in runs}, {}
    monitor = cpu_timing.CpuMonitor()
    for _ in range(1 if args.quick else args.passes):
        for name, (engine, compute) in runs.items():

            def run(batch, engine=engine, compute=compute):
                return engine.encode(batch, 32, show_progress=False, compute=compute)[0]

            vectors[name], timing = cpu_timing.timed_passes(run, texts, 1, monitor, warmup_texts=8)
            rates[name].append(round(timing["texts_per_second"], 1))
    for name, (engine, compute) in runs.items():
        common.emit(
            benchmark=NAME,
            variant=name,
            route=list(engine.route(compute)),
            texts=len(texts),
            texts_per_second_passes=rates[name],
            texts_per_second_best=max(rates[name]),
        )
    reference = vectors["fused_float32"]
    int8 = vectors["xnnpack_int8"]
    cosine = (int8 * reference).sum(1) / np.linalg.norm(int8, axis=1) / np.linalg.norm(reference, axis=1)
    common.emit(
        benchmark=NAME,
        kind="summary",
        float32_max_abs_diff=float(np.abs(vectors["xnnpack_float32"] - reference).max()),
        int8_min_cosine=float(cosine.min()),
        cpu=sorted(cpu_timing.cpu_flags() & {"avx2", "fma", "avx512f", "avx512_vnni", "amx_int8"}),
        **monitor.report(),
    )
    if args.queries:
        engine = runs["xnnpack_float32"][0]
        monitor = cpu_timing.CpuMonitor()
        times = query_latencies(engine, texts[: 20 if args.quick else args.queries], monitor)
        for name, ms in times.items():
            common.emit(
                benchmark=NAME,
                kind="query",
                route=name,
                queries=len(ms),
                median_ms=round(float(np.median(ms)), 2),
                p90_ms=round(float(np.percentile(ms, 90)), 2),
            )
        auto = engine.select("auto", "one")[0].name  # the races of the routes above, run now
        common.emit(benchmark=NAME, kind="query_summary", auto_one=auto, **monitor.report())
    return 0


if __name__ == "__main__":
    sys.exit(main())
