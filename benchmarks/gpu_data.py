"""The host side of `benchmarks/gpu.py`: sizes, the model folder, the token ids every engine trains on, records.

Both engines must see the same model and the same numbers: the model folder
is written once (a seeded BERT configuration with random weights, as a
sentence-transformers folder, so no weights travel to the GPU machine), and
STS-B is tokenised once here, with the folder's `tokenizer.json`, into the
padded id arrays that `gpu_keras.py` and `gpu_torch.py` both read from one
`.npz` file. Training batches are padded to one width (`train_tokens`), so
JAX compiles one train step per batch size; the encode and forward batches
are sorted by length and padded to a multiple of `BUCKET` tokens.

Records are JSON lines: `measurement` (`train`, `forward_ids`, `encode`,
`float32_check`), `engine` (`sbert_keras` on JAX, `sentence_transformers`
on torch), `precision`, `batch_size`, the figures, and `error` when the
measurement failed (the others go on).
"""

import json
import math
import re
import shutil
import sys
import time
import traceback
from pathlib import Path

import numpy as np

BENCHMARK = "gpu"
BUCKET = 16
PAD_ID = 0
ENGINES = ("sbert_keras", "sentence_transformers")
MIXED = ("bfloat16", "float16")
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "tokenizer_config.json", "special_tokens_map.json")

SIZES = {
    "full": {
        "layers": 12,
        "hidden": 768,
        "heads": 12,
        "intermediate": 3072,
        "batch_sizes": (16, 128),
        "timed_steps": {16: 60, 128: 25},
        "warmup_steps": 3,
        "train_tokens": 64,
        "encode_texts": 20000,
        "encode_batch": 128,
        "check_texts": 512,
        "budget_s": 445,
    },
    "smoke": {
        "layers": 2,
        "hidden": 32,
        "heads": 2,
        "intermediate": 64,
        "batch_sizes": (16,),
        "timed_steps": {16: 3},
        "warmup_steps": 1,
        "train_tokens": 64,
        "encode_texts": 256,
        "encode_batch": 256,
        "check_texts": 48,
        "budget_s": 600,  # a guard only: a busy CI machine can be several times slower than an idle one
    },
}


def planned(engines, sizes):
    """`(measurement, engine, precision, batch_size)` of every record a run of `engines` at `sizes` must write."""
    plan = []
    for engine in engines:
        plan.append(("float32_check", engine, "float32", None))
        for precision in MIXED:
            plan += [("train", engine, precision, size) for size in sizes["batch_sizes"]]
            plan += [("forward_ids", engine, precision, None), ("encode", engine, precision, None)]
    return plan


def key(record):
    return (record.get("measurement"), record.get("engine"), record.get("precision"), record.get("batch_size"))


# === Records ===


def emit(**fields):
    """One JSON line on stdout (NaN written as null: JSON has no NaN)."""
    clean = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in fields.items()}
    print(json.dumps({"benchmark": BENCHMARK, **clean}, default=str), flush=True)


def one_line(text):
    """`text` without terminal colour codes, its whitespace runs (newlines too) as single spaces."""
    return " ".join(re.sub(r"\x1b\[[0-9;]*m", "", text).split())


def guarded(measurement, engine, precision, batch_size=None, deadline=None, needs_s=0.0):
    """Runs a measurement's function and emits its record; an exception becomes the record's `error`.

    Returns a decorator: `@guarded("train", ...)` on a function of no
    arguments that returns a dict of figures. A measurement that would start
    with less than `needs_s` seconds before `deadline` is skipped, and says so.
    """

    def run(function):
        base = {"measurement": measurement, "engine": engine, "precision": precision, "batch_size": batch_size}
        if deadline is not None and time.time() + needs_s > deadline:
            emit(**base, error="skipped: the time budget is spent")
            return None
        start = time.perf_counter()
        try:
            figures = function()
        except Exception as error:  # noqa: BLE001 (recorded; the next measurement goes on)
            traceback.print_exc(file=sys.stderr)
            emit(**base, error=f"{type(error).__name__}: {one_line(str(error))[:400]}")
            return None
        emit(**base, **figures, wall_s=round(time.perf_counter() - start, 2), error=None)
        return figures

    return run


def loss_summary(losses):
    """First and last losses of a run (means of up to 10 steps), whether it fell, whether all are finite."""
    losses = np.asarray(losses, "float64")
    if losses.size == 0:
        nan = float("nan")
        return {"loss_first": nan, "loss_last": nan, "loss_falls": False, "loss_finite": False, "steps": 0}
    k = max(1, min(10, len(losses) // 4))
    finite = bool(np.all(np.isfinite(losses)))
    first, last = float(np.mean(losses[:k])), float(np.mean(losses[-k:]))
    return {
        "loss_first": first,
        "loss_last": last,
        "loss_falls": bool(finite and last < first),
        "loss_finite": finite,
        "steps": len(losses),
    }


def vector_check(reference, output):
    """max |Δ|, the reference's largest |value| and the least row cosine between two embedding matrices."""
    reference, output = np.asarray(reference, "float64"), np.asarray(output, "float64")
    norms = np.linalg.norm(reference, axis=1) * np.linalg.norm(output, axis=1)
    cosines = np.sum(reference * output, axis=1) / np.maximum(norms, 1e-30)
    return {
        "max_abs_diff": float(np.max(np.abs(reference - output))),
        "max_abs_reference": float(np.max(np.abs(reference))),
        "min_cosine": float(np.min(cosines)),
        "texts": int(reference.shape[0]),
    }


# === The model folder ===


def bert_config(sizes, vocab_size):
    return {
        "architectures": ["BertModel"],
        "model_type": "bert",
        "vocab_size": vocab_size,
        "hidden_size": sizes["hidden"],
        "num_hidden_layers": sizes["layers"],
        "num_attention_heads": sizes["heads"],
        "intermediate_size": sizes["intermediate"],
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1,
        "attention_probs_dropout_prob": 0.1,
        "max_position_embeddings": 512,
        "type_vocab_size": 2,
        "initializer_range": 0.02,
        "layer_norm_eps": 1e-12,
        "pad_token_id": PAD_ID,
    }


def write_weights_with_transformers(config, folder, seed):
    """`BertModel(BertConfig(...))` with `torch.manual_seed(seed)`, saved as safetensors; False without transformers."""
    try:
        import torch
        import transformers
    except ImportError:
        return False
    torch.manual_seed(seed)
    model = transformers.BertModel(transformers.BertConfig(**config), add_pooling_layer=True)
    model.save_pretrained(str(folder), safe_serialization=True)
    return True


def write_weights_with_numpy(config, folder, seed):
    """The same tensors, names and initialisation (normal, std 0.02) drawn with NumPy."""
    from safetensors.numpy import save_file

    rng = np.random.default_rng(seed)
    hidden, inner = config["hidden_size"], config["intermediate_size"]

    def normal(*shape):
        return (rng.standard_normal(shape) * config["initializer_range"]).astype("float32")

    def norm(prefix):
        return {f"{prefix}.weight": np.ones(hidden, "float32"), f"{prefix}.bias": np.zeros(hidden, "float32")}

    def dense(prefix, out, inp):
        return {f"{prefix}.weight": normal(out, inp), f"{prefix}.bias": np.zeros(out, "float32")}

    tensors = {
        "embeddings.word_embeddings.weight": normal(config["vocab_size"], hidden),
        "embeddings.position_embeddings.weight": normal(config["max_position_embeddings"], hidden),
        "embeddings.token_type_embeddings.weight": normal(config["type_vocab_size"], hidden),
        **norm("embeddings.LayerNorm"),
        **dense("pooler.dense", hidden, hidden),
    }
    for i in range(config["num_hidden_layers"]):
        layer = f"encoder.layer.{i}"
        for name in ("query", "key", "value"):
            tensors.update(dense(f"{layer}.attention.self.{name}", hidden, hidden))
        tensors.update(dense(f"{layer}.attention.output.dense", hidden, hidden))
        tensors.update(norm(f"{layer}.attention.output.LayerNorm"))
        tensors.update(dense(f"{layer}.intermediate.dense", inner, hidden))
        tensors.update(dense(f"{layer}.output.dense", hidden, inner))
        tensors.update(norm(f"{layer}.output.LayerNorm"))
    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
    (folder / "config.json").write_text(json.dumps(config, indent=2))


def build_model_folder(sizes, tokenizer_dir, folder, seed=0):
    """A sentence-transformers folder (Transformer + mean Pooling) of random BERT weights; returns how it was made."""
    folder = Path(folder)
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    for name in TOKENIZER_FILES:
        if (Path(tokenizer_dir) / name).is_file():
            shutil.copy(Path(tokenizer_dir) / name, folder / name)
    vocab_size = sum(1 for _ in open(folder / "vocab.txt", encoding="utf-8"))
    config = bert_config(sizes, vocab_size)
    builder = "transformers" if write_weights_with_transformers(config, folder, seed) else "numpy"
    if builder == "numpy":
        write_weights_with_numpy(config, folder, seed)
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    ]
    (folder / "modules.json").write_text(json.dumps(modules, indent=2))
    (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 128, "do_lower_case": False}))
    (folder / "1_Pooling").mkdir()
    pooling = {"word_embedding_dimension": sizes["hidden"], "pooling_mode_mean_tokens": True}
    (folder / "1_Pooling" / "config.json").write_text(json.dumps(pooling, indent=2))
    return builder


# === Token ids, tokenised once ===


def read_sts(path):
    """`(sentence_a, sentence_b, score)` lists of an STS-B `.csv` (tab-separated, score in column 5)."""
    a, b, scores = [], [], []
    with open(path, encoding="utf-8") as file:
        for line in file:
            cells = line.rstrip("\n").split("\t")
            if len(cells) >= 7:
                a.append(cells[5])
                b.append(cells[6])
                scores.append(float(cells[4]))
    return a, b, np.asarray(scores, "float32")


def tokenize(tokenizer_file, texts, max_tokens):
    """Token id lists (with [CLS] and [SEP]) of `texts`, cut to `max_tokens`."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(tokenizer_file))
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=max_tokens)
    return [encoding.ids for encoding in tokenizer.encode_batch(texts)]


def padded(rows, width):
    ids = np.full((len(rows), width), PAD_ID, "int32")
    for i, row in enumerate(rows):
        ids[i, : len(row)] = row[:width]
    return ids


def bucket_width(rows):
    return BUCKET * math.ceil(max(len(row) for row in rows) / BUCKET)


def sorted_batches(rows, batch_size):
    """Rows sorted by length (longest first) in batches, each padded to its bucket width."""
    order = sorted(range(len(rows)), key=lambda i: -len(rows[i]))
    chunks = [[rows[i] for i in order[s : s + batch_size]] for s in range(0, len(order), batch_size)]
    return [padded(chunk, bucket_width(chunk)) for chunk in chunks]


def prepare_arrays(sizes, data_file, tokenizer_file, out_file, seed=0):
    """Writes every id array the engines read to one `.npz`, and the encode texts beside it; returns counts."""
    a, b, scores = read_sts(data_file)
    ids_a = tokenize(tokenizer_file, a, sizes["train_tokens"])
    ids_b = tokenize(tokenizer_file, b, sizes["train_tokens"])
    rng = np.random.default_rng(seed)
    arrays = {}
    for size in sizes["batch_sizes"]:
        steps = sizes["warmup_steps"] + sizes["timed_steps"][size]
        order = np.concatenate([rng.permutation(len(a)) for _ in range(math.ceil(steps * size / len(a)) + 1)])
        for step in range(steps):
            rows = order[step * size : (step + 1) * size]
            arrays[f"train{size}_a_{step}"] = padded([ids_a[i] for i in rows], sizes["train_tokens"])
            arrays[f"train{size}_b_{step}"] = padded([ids_b[i] for i in rows], sizes["train_tokens"])
            arrays[f"train{size}_label_{step}"] = scores[rows] / 5.0
    sentences = [text for pair in zip(a, b) for text in pair]
    texts = [sentences[i % len(sentences)] for i in range(sizes["encode_texts"])]
    for i, batch in enumerate(sorted_batches(tokenize(tokenizer_file, texts, 128), sizes["encode_batch"])):
        arrays[f"forward_{i}"] = batch
    check = tokenize(tokenizer_file, sentences[: sizes["check_texts"]], 128)
    arrays["check"] = padded(check, bucket_width(check))
    np.savez(out_file, **arrays)
    Path(out_file).with_suffix(".texts.json").write_text(json.dumps(texts))
    return {"train_pairs": len(a), "encode_texts": len(texts), "check_texts": len(check)}


class Arrays:
    """The `.npz` of `prepare_arrays`, read back: training steps, forward batches, check ids, encode texts."""

    def __init__(self, npz_file):
        self.data = np.load(npz_file)
        self.texts = json.loads(Path(npz_file).with_suffix(".texts.json").read_text())

    def train_steps(self, batch_size):
        steps = sum(1 for name in self.data.files if name.startswith(f"train{batch_size}_label_"))
        d = self.data
        return [
            (d[f"train{batch_size}_a_{s}"], d[f"train{batch_size}_b_{s}"], d[f"train{batch_size}_label_{s}"])
            for s in range(steps)
        ]

    def forward_batches(self):
        count = sum(1 for name in self.data.files if name.startswith("forward_"))
        return [self.data[f"forward_{i}"] for i in range(count)]

    @property
    def check(self):
        return self.data["check"]


def timed_loop(steps, run_step, deadline=None):
    """Runs `run_step(step)` on each step; each returns a host value, so each step has ended on the device.

    Stops early once `deadline` (a `time.time()`) passes. Returns
    `(values, start, ends)`: the values, and the `perf_counter` before the
    first step and after each, for `window`.
    """
    values, ends, start = [], [], time.perf_counter()
    for step in steps:
        values.append(run_step(step))
        ends.append(time.perf_counter())
        if deadline is not None and time.time() > deadline:
            break
    return values, start, ends


def window(start, ends, warmup, batch_size):
    """Rates of the steps after the first `warmup` (compilation, autotuning), from each step's end time.

    `steps_per_s` is the timed steps over their wall time, `median_step_s`
    the median of their durations; `warmup_s` is the time to the end of the
    last warm-up step. The training batches all have one width, so nothing
    compiles after the warm-up.
    """
    timed = len(ends) - warmup
    if warmup < 1 or timed < 1:
        nan = float("nan")
        return {"timed_steps": max(timed, 0), "steps_per_s": nan, "samples_per_s": nan, "median_step_s": nan}
    seconds = ends[-1] - ends[warmup - 1]
    return {
        "timed_steps": timed,
        "steps_per_s": timed / seconds,
        "samples_per_s": timed * batch_size / seconds,
        "median_step_s": float(np.median(np.diff(ends[warmup - 1 :]))),
        "warmup_steps": warmup,
        "warmup_s": round(ends[warmup - 1] - start, 2),
    }
