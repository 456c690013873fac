"""The sbert_keras half of `benchmarks/gpu.py`: Keras on JAX, one precision per process.

Run by `gpu.py` with `KERAS_BACKEND=jax`, never by hand. `--precision
float32` compares the encoder's float32 vectors on the accelerator with the
same model's on the CPU (`keras.device("cpu:0")`), at JAX's default matmul
precision and at `"highest"`; `bfloat16` and `float16` train the regression
objective (`RegressionSiamese`: cosine of the pair against score / 5, MSE)
under `set_compute` (Keras' `mixed_bfloat16` / `mixed_float16`; float16
with `keras.optimizers.LossScaleOptimizer`) with AdamW at 2e-5, at each
batch size, each run from the same initial weights, then time `encode` on
the texts and the forward pass on token ids. Peak memory is the device's
`memory_stats()["peak_bytes_in_use"]`, which JAX never resets: the
measurements run smallest first, and `bytes_in_use_before` says what was
still held when each began.
"""

import argparse
import functools
import gc
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("KERAS_BACKEND", "jax")
sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpu_data  # noqa: E402
import jax  # noqa: E402
import keras  # noqa: E402
import numpy as np  # noqa: E402

import sbert_keras  # noqa: E402
from sbert_keras.model.precision import set_compute  # noqa: E402
from sbert_keras.training.siamese import RegressionSiamese  # noqa: E402
from sbert_keras.utils.backends import TensorFlowRequired  # noqa: E402

ENGINE = "sbert_keras"
LEARNING_RATE, WEIGHT_DECAY, EPSILON = 2e-5, 0.01, 1e-8
CHECK_BATCH = 128
MIB = 2**20


def role_inputs(ids, names, prefix=""):
    """The model inputs named `prefix + token_ids|padding_mask|segment_ids` for the padded `ids`."""
    fields = {
        "token_ids": ids,
        "padding_mask": (ids != gpu_data.PAD_ID).astype("int32"),
        "segment_ids": np.zeros_like(ids),
    }
    return {name: fields[name[len(prefix) :]] for name in names if name.startswith(prefix)}


def memory():
    """`(peak, in use)` bytes of the first device, or `(None, None)` where JAX does not report them (the CPU)."""
    stats = jax.local_devices()[0].memory_stats() or {}
    return stats.get("peak_bytes_in_use"), stats.get("bytes_in_use")


def mib(value):
    return None if value is None else round(value / MIB, 1)


def release():
    keras.backend.clear_session()
    gc.collect()


def load_encoder(model_dir, precision):
    set_compute(precision)
    keras.utils.set_random_seed(0)
    return sbert_keras.SentenceEncoder.from_preset(model_dir)


def embed(encoder, ids):
    names = list(encoder.input)
    parts = [
        keras.Model.predict_on_batch(encoder, role_inputs(ids[s : s + CHECK_BATCH], names))
        for s in range(0, len(ids), CHECK_BATCH)
    ]
    return np.concatenate([np.asarray(p, "float32") for p in parts])


def device_of(encoder):
    """Where the encoder's first weight lives (a JAX array's device; another backend's `device` string)."""
    value = encoder.weights[0].value
    return str(next(iter(value.devices()))) if hasattr(value, "devices") else str(getattr(value, "device", "?"))


def float32_check(args, arrays):
    with keras.device("cpu:0"):
        reference_encoder = load_encoder(args.model, "float32")
        reference = embed(reference_encoder, arrays.check)
    reference_device = device_of(reference_encoder)
    np.save(Path(args.work) / "keras_float32_cpu.npy", reference)
    encoder = load_encoder(args.model, "float32")
    figures = gpu_data.vector_check(reference, embed(encoder, arrays.check))
    figures.update(reference_device=reference_device, device=device_of(encoder))
    if jax.local_devices()[0].platform != "cpu":  # the CPU has no reduced-precision float32 matmuls
        with jax.default_matmul_precision("highest"):
            highest = gpu_data.vector_check(reference, embed(encoder, arrays.check))
        figures.update(highest_max_abs_diff=highest["max_abs_diff"], highest_min_cosine=highest["min_cosine"])
    return figures


class StepClock(keras.callbacks.Callback):
    """Each step's end time and loss in `fit` (reading the loss waits for the step, as torch's `.item()`).

    Keras logs the epoch's running mean; with equal batches, step i's own
    loss is `(i + 1) * mean_i - i * mean_(i-1)`. Stops `fit` after the step
    that ends past `deadline`.
    """

    def __init__(self, deadline=None):
        super().__init__()
        self.deadline, self.ends, self.means = deadline, [], []

    def on_train_batch_end(self, batch, logs=None):
        self.means.append(float(logs["loss"]))
        self.ends.append(time.perf_counter())
        if self.deadline is not None and time.time() > self.deadline:
            self.model.stop_training = True

    def losses(self):
        counts = np.arange(1, len(self.means) + 1)
        totals = np.asarray(self.means, "float64") * counts
        return list(np.diff(totals, prepend=0.0))


def train(args, arrays, batch_size, deadline):
    """`fit` on the steps' arrays in their order (`shuffle=False`): the batches are the torch half's."""
    peak_before, in_use_before = memory()
    encoder = load_encoder(args.model, args.compute)
    model = RegressionSiamese(encoder)
    optimizer = keras.optimizers.AdamW(LEARNING_RATE, weight_decay=WEIGHT_DECAY, epsilon=EPSILON)
    if args.compute == "float16":
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    model.compile(optimizer=optimizer)
    names, steps = list(model.input), arrays.train_steps(batch_size)
    a, b, labels = (np.concatenate([step[i] for step in steps]) for i in range(3))
    x = {**role_inputs(a, names, "sentence_a_"), **role_inputs(b, names, "sentence_b_")}
    clock, fit_path = StepClock(deadline), "fit"
    start = time.perf_counter()
    try:
        model.fit(x, labels, batch_size=batch_size, epochs=1, shuffle=False, verbose=0, callbacks=[clock])
    except TensorFlowRequired as error:
        # Raised before the first step, where the arrays would be batched by tf.data: Keras' own `fit`
        # batches the same arrays in the same order and runs the same train step.
        clock, fit_path = StepClock(deadline), f"keras.Model.fit ({error})"
        start = time.perf_counter()
        keras.Model.fit(model, x, labels, batch_size=batch_size, epochs=1, shuffle=False, verbose=0, callbacks=[clock])
    peak, _ = memory()
    figures = {
        "fit_path": fit_path,
        **gpu_data.window(start, clock.ends, args.warmup, batch_size),
        **gpu_data.loss_summary(clock.losses()),
        "sequence_length": int(a.shape[1]),
        "peak_memory_mib": mib(peak),
        "peak_memory_before_mib": mib(peak_before),
        "bytes_in_use_before_mib": mib(in_use_before),
        "dtype_policy": encoder.backbone.dtype_policy.name,
        "optimizer": type(model.optimizer).__name__,
    }
    if args.compute == "float16":
        figures["loss_scale"] = float(keras.ops.convert_to_numpy(model.optimizer.dynamic_scale))
    return figures


def forward_ids(args, arrays):
    encoder = load_encoder(args.model, args.compute)
    names, batches = list(encoder.input), arrays.forward_batches()

    def run():
        return [np.asarray(keras.Model.predict_on_batch(encoder, role_inputs(ids, names))) for ids in batches]

    start = time.perf_counter()
    run()
    warmup = time.perf_counter() - start
    start = time.perf_counter()
    outputs = run()
    seconds = time.perf_counter() - start
    texts = sum(len(ids) for ids in batches)
    finite = all(np.all(np.isfinite(o.astype("float32"))) for o in outputs)
    return {
        "texts": texts,
        "texts_per_s": texts / seconds,
        "warmup_s": round(warmup, 2),
        "texts_per_batch": int(len(batches[0])),
        "widths": sorted({int(ids.shape[1]) for ids in batches}),
        "finite": bool(finite),
    }


def encode(args, arrays, batch_size):
    encoder = load_encoder(args.model, "float32")
    texts = arrays.texts
    start = time.perf_counter()
    encoder.encode(texts, batch_size=batch_size, compute=args.compute, show_progress=False)
    warmup = time.perf_counter() - start
    start = time.perf_counter()
    vectors = encoder.encode(texts, batch_size=batch_size, compute=args.compute, show_progress=False)
    seconds = time.perf_counter() - start
    return {
        "texts": len(texts),
        "texts_per_batch": batch_size,
        "texts_per_s": len(texts) / seconds,
        "warmup_s": round(warmup, 2),
        "shape": list(vectors.shape),
        "finite": bool(np.all(np.isfinite(vectors))),
    }


def run_precision(args, arrays, sizes, guard):
    """The measurements of one precision, each guarded; the float32 process runs the check only."""
    if args.compute == "float32":
        gpu_data.guarded("float32_check", ENGINE, "float32", **guard)(functools.partial(float32_check, args, arrays))
        return
    for batch_size in sizes["batch_sizes"]:
        gpu_data.guarded("train", ENGINE, args.compute, batch_size, **guard)(
            functools.partial(train, args, arrays, batch_size, args.deadline)
        )
        release()
    gpu_data.guarded("encode", ENGINE, args.compute, **guard)(
        functools.partial(encode, args, arrays, sizes["encode_batch"])
    )
    release()
    gpu_data.guarded("forward_ids", ENGINE, args.compute, **guard)(functools.partial(forward_ids, args, arrays))
    release()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--precisions", required=True, help="comma-separated: float32, bfloat16, float16")
    parser.add_argument("--sizes", default="full", choices=tuple(gpu_data.SIZES))
    parser.add_argument("--deadline", type=float, default=None)
    args = parser.parse_args()
    sizes = gpu_data.SIZES[args.sizes]
    args.warmup = sizes["warmup_steps"]
    arrays = gpu_data.Arrays(Path(args.work) / "arrays.npz")
    device = jax.local_devices()[0]
    gpu_data.emit(
        measurement="environment",
        engine=ENGINE,
        precisions=args.precisions,
        platform=device.platform,
        device=getattr(device, "device_kind", str(device)),
        jax=jax.__version__,
        keras=keras.__version__,
        keras_backend=keras.backend.backend(),
        sbert_keras=sbert_keras.__version__,
    )
    if args.sizes == "full" and device.platform == "cpu":
        sys.exit("JAX sees no GPU (its CUDA plugin did not load): the full sizes would run on the CPU")
    guard = {"deadline": args.deadline, "needs_s": 2.0 if args.sizes == "smoke" else 20.0}
    for precision in args.precisions.split(","):
        args.compute = precision
        run_precision(args, arrays, sizes, guard)


if __name__ == "__main__":
    main()
