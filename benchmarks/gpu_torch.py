"""The sentence-transformers half of `benchmarks/gpu.py`: the same model, ids and steps on PyTorch.

Run by `gpu.py` with the peer's interpreter (on the GPU machine, its one
`python3`), never by hand. The float32 check compares the model's vectors
on the GPU with a CPU copy's, and with the CPU vectors of the sbert_keras
half when that ran first (`cross_engine_*`: the two libraries load the same
folder into the same function). Training is sentence-transformers'
`CosineSimilarityLoss` (cosine of the pair against score / 5, MSE) on the
same padded id batches, with torch's AdamW at 2e-5 under `torch.autocast`:
bfloat16, and float16 with `torch.amp.GradScaler`. Every training run
starts from the folder's weights. The forward pass and `encode` run the
model cast to the precision (`model.to(dtype)`, as `model.half()`), the
usual inference set-up. Peak memory is `torch.cuda.max_memory_allocated`,
reset before each measurement.
"""

import argparse
import functools
import gc
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpu_data  # noqa: E402
import numpy as np  # noqa: E402
import sentence_transformers  # noqa: E402
import torch  # noqa: E402
from sentence_transformers import SentenceTransformer  # noqa: E402

try:  # sentence-transformers >= 6
    from sentence_transformers.sentence_transformer.losses import CosineSimilarityLoss
except ImportError:
    from sentence_transformers.losses import CosineSimilarityLoss

ENGINE = "sentence_transformers"
LEARNING_RATE, WEIGHT_DECAY, EPSILON = 2e-5, 0.01, 1e-8
CHECK_BATCH = 128
DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
MIB = 2**20


def features(ids, device=DEVICE):
    token_ids = torch.from_numpy(np.asarray(ids, "int64")).to(device)
    mask = (token_ids != gpu_data.PAD_ID).long()
    return {"input_ids": token_ids, "attention_mask": mask, "token_type_ids": torch.zeros_like(token_ids)}


def reset_memory():
    gc.collect()
    if DEVICE == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def peak_mib():
    return round(torch.cuda.max_memory_allocated() / MIB, 1) if DEVICE == "cuda" else None


def load(model_dir, device=DEVICE, dtype=None):
    torch.manual_seed(0)
    model = SentenceTransformer(str(model_dir), device=device)
    return model if dtype is None else model.to(dtype)


@torch.inference_mode()
def embed(model, ids, device=DEVICE):
    model.eval()
    parts = [
        model(features(ids[s : s + CHECK_BATCH], device))["sentence_embedding"].float().cpu().numpy()
        for s in range(0, len(ids), CHECK_BATCH)
    ]
    return np.concatenate(parts)


def float32_check(args, arrays):
    reference = embed(load(args.model, "cpu"), arrays.check, "cpu")
    figures = gpu_data.vector_check(reference, embed(load(args.model), arrays.check))
    figures["device"] = DEVICE
    figures["allow_tf32"] = bool(torch.backends.cuda.matmul.allow_tf32)
    keras_reference = Path(args.work) / "keras_float32_cpu.npy"
    if keras_reference.is_file():
        across = gpu_data.vector_check(np.load(keras_reference), reference)
        figures["cross_engine_max_abs_diff"] = across["max_abs_diff"]
        figures["cross_engine_min_cosine"] = across["min_cosine"]
    return figures


def train(args, arrays, precision, batch_size, deadline):
    reset_memory()
    model = load(args.model)
    model.train()
    loss_function = CosineSimilarityLoss(model)
    fused = {"fused": True} if DEVICE == "cuda" else {}
    optimizer = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE, weight_decay=WEIGHT_DECAY, eps=EPSILON, **fused)
    scaler = torch.amp.GradScaler(DEVICE, enabled=precision == "float16")

    def step(batch):
        a, b, label = batch
        with torch.autocast(device_type=DEVICE, dtype=DTYPES[precision]):
            loss = loss_function([features(a), features(b)], torch.from_numpy(label).to(DEVICE))
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        return float(loss.detach())

    losses, start, ends = gpu_data.timed_loop(arrays.train_steps(batch_size), step, deadline)
    figures = {
        **gpu_data.window(start, ends, args.warmup, batch_size),
        **gpu_data.loss_summary(losses),
        "sequence_length": int(arrays.train_steps(batch_size)[0][0].shape[1]),
        "peak_memory_mib": peak_mib(),
        "autocast": str(DTYPES[precision]),
        "optimizer": "AdamW" + (" (fused)" if fused else ""),
    }
    if precision == "float16":
        figures["loss_scale"] = float(scaler.get_scale())
    return figures


def forward_ids(args, arrays, precision):
    model = load(args.model, dtype=DTYPES[precision])
    batches = arrays.forward_batches()
    start = time.perf_counter()
    outputs = [embed(model, ids) for ids in batches]
    warmup = time.perf_counter() - start
    start = time.perf_counter()
    outputs = [embed(model, ids) for ids in batches]
    seconds = time.perf_counter() - start
    texts = sum(len(ids) for ids in batches)
    return {
        "texts": texts,
        "texts_per_batch": int(len(batches[0])),
        "texts_per_s": texts / seconds,
        "warmup_s": round(warmup, 2),
        "widths": sorted({int(ids.shape[1]) for ids in batches}),
        "finite": bool(all(np.all(np.isfinite(o)) for o in outputs)),
    }


def encode(args, arrays, precision, batch_size):
    model = load(args.model, dtype=DTYPES[precision])
    texts = arrays.texts
    start = time.perf_counter()
    model.encode(texts, batch_size=batch_size, show_progress_bar=False, convert_to_numpy=True)
    warmup = time.perf_counter() - start
    start = time.perf_counter()
    vectors = model.encode(texts, batch_size=batch_size, show_progress_bar=False, convert_to_numpy=True)
    seconds = time.perf_counter() - start
    vectors = np.asarray(vectors, "float32")
    return {
        "texts": len(texts),
        "texts_per_batch": batch_size,
        "texts_per_s": len(texts) / seconds,
        "warmup_s": round(warmup, 2),
        "shape": list(vectors.shape),
        "finite": bool(np.all(np.isfinite(vectors))),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--sizes", default="full", choices=tuple(gpu_data.SIZES))
    parser.add_argument("--deadline", type=float, default=None)
    args = parser.parse_args()
    sizes = gpu_data.SIZES[args.sizes]
    args.warmup = sizes["warmup_steps"]
    arrays = gpu_data.Arrays(Path(args.work) / "arrays.npz")
    if args.sizes == "smoke":
        torch.set_num_threads(2)
    gpu_data.emit(
        measurement="environment",
        engine=ENGINE,
        device=torch.cuda.get_device_name(0) if DEVICE == "cuda" else "cpu",
        torch=torch.__version__,
        sentence_transformers=sentence_transformers.__version__,
    )
    if args.sizes == "full" and DEVICE == "cpu":
        sys.exit("PyTorch sees no GPU: the full sizes would run on the CPU")
    guard = {"deadline": args.deadline, "needs_s": 2.0 if args.sizes == "smoke" else 10.0}
    gpu_data.guarded("float32_check", ENGINE, "float32", **guard)(functools.partial(float32_check, args, arrays))
    for precision in gpu_data.MIXED:
        for batch_size in sizes["batch_sizes"]:
            gpu_data.guarded("train", ENGINE, precision, batch_size, **guard)(
                functools.partial(train, args, arrays, precision, batch_size, args.deadline)
            )
            reset_memory()
        gpu_data.guarded("encode", ENGINE, precision, **guard)(
            functools.partial(encode, args, arrays, precision, sizes["encode_batch"])
        )
        reset_memory()
        gpu_data.guarded("forward_ids", ENGINE, precision, **guard)(
            functools.partial(forward_ids, args, arrays, precision)
        )
        reset_memory()


if __name__ == "__main__":
    main()
