"""Inference on Keras' JAX and PyTorch backends: texts tokenised on the host, the Keras graph, smart batching.

The routes of `runtime.engine` (the fused graph, oneDNN and XNNPACK int8,
the XLA single query) are TensorFlow graphs. On another backend the engine
is this one: texts are tokenised by the preprocessor's host tokenizer
(`SentenceEncoderPreprocessor.host_token_ids`, Hugging Face's `tokenizers`),
sorted by length, padded per batch to a length of `defaults.BUCKETS` (XLA
compiles once per shape, so few shapes), and run through the encoder's own
graph before L2 normalisation: on JAX one `jax.jit` of the model's
stateless call (`jax_forward`), elsewhere Keras' `predict_on_batch`
(`no_grad` on torch). Padding is masked, so a padded text gets the
vector it gets alone.

`"auto"` is float32 on a CPU (these backends have no self-checked bf16
path here) and float16 on a GPU, as `hardware.Host.auto_precision` says; a
named compute path runs the encoder's copy under that mixed policy
(`graphs.keras_model_for`), int8 an encoder quantized by Keras as it is.

Example:
```python
engine = HostEngine(encoder)  # what `encoder.engine` is under KERAS_BACKEND=jax
pooled, num_truncated = engine.encode(["a text"], batch_size=32)
```
"""

import bisect
import functools
import time

import keras
import numpy as np

from sbert_keras.runtime import batching
from sbert_keras.runtime import cold_start
from sbert_keras.runtime.graphs import keras_model_for
from sbert_keras.utils import hardware
from sbert_keras.utils.defaults import BUCKETS
from sbert_keras.utils.defaults import COMPUTES

WARMUP_TEXTS = ("A man is playing a guitar.", "A dog runs in the park.")


def bucket_width(longest, limit=None):
    """The padded length of a batch whose longest text has `longest` tokens: the next of `defaults.BUCKETS`.

    Never past `limit` (the preprocessor's `sequence_length`, which no row exceeds): a model whose position
    embeddings stop there cannot take a longer row.
    """
    index = bisect.bisect_left(BUCKETS, longest)
    width = BUCKETS[index] if index < len(BUCKETS) else longest
    return width if limit is None else max(longest, min(width, limit))


def jax_forward(model):
    """`feed -> outputs` of `model` as one `jax.jit` of its stateless call, reading the variables at each call.

    Keras' `predict_on_batch` on JAX writes every variable back after each
    batch; inference needs none of that. JAX is optional, imported here.
    """
    import jax

    compiled = jax.jit(lambda trainable, other, feed: model.stateless_call(trainable, other, feed, training=False)[0])

    def forward(feed):
        trainable = [v.value for v in model.trainable_variables]
        other = [v.value for v in model.non_trainable_variables]
        return compiled(trainable, other, feed)

    return forward


def unnormalized(model):
    """A model sharing `model`'s layers whose output is the projected pooled vector, before L2 normalisation."""
    layer = getattr(model, "normalization_layer", None)
    output = model.output if layer is None else layer.input
    return keras.Model(model.input, output, name=f"{model.name}_pooled")


class HostEngine:
    """Runs a `SentenceEncoder` for inference on any Keras backend (see the module docstring).

    Args:
        encoder: a `SentenceEncoder` with a preprocessor.
        host: a `hardware.Host`, or None for `hardware.current_host()`.
    """

    def __init__(self, encoder, host=None):
        self.encoder = encoder
        self.host = host or hardware.current_host()
        self._copies = {}  # compute -> the encoder's copy under that policy (`keras_model_for`)
        self._runs = {}  # resolved compute -> its forward (`_runner`)
        self.prepared = set()

    def resolve(self, compute):
        """`compute` checked; `"auto"` is float32 on a CPU and `Host.auto_precision()` on a GPU."""
        compute = "auto" if compute is None else compute
        if compute not in COMPUTES:
            raise ValueError(f"`compute` must be one of {COMPUTES}. Received {compute!r}.")
        if compute == "auto":
            return self.host.auto_precision() if self.host.gpu else "float32"
        return "float32" if compute == "int8" else self.host.runnable_precision(compute)

    def keras_model(self, compute):
        """The encoder, or its copy computing in `compute` (synced with its weights on every call)."""
        return keras_model_for(self.encoder, self.resolve(compute), self._copies)

    def invalidate(self):
        """Nothing is cached from the weights: each call reads them (the copies re-sync)."""

    def route(self, compute="auto"):
        """`("keras", resolved compute)`: the only route on this backend."""
        return "keras", self.resolve(compute)

    def _runner(self, compute):
        """`run(token_ids, padding_mask)` -> pooled float32 vectors in `compute`, built once per compute."""
        model = self.keras_model(compute)  # a copy re-syncs its weights here, once per call of `encode`
        key = self.resolve(compute)
        if key not in self._runs:
            pooled = unnormalized(model)
            names = list(pooled.input)
            forward = jax_forward(pooled) if keras.backend.backend() == "jax" else pooled.predict_on_batch

            def run(token_ids, padding_mask):
                feed = {"token_ids": token_ids, "padding_mask": padding_mask, "segment_ids": np.zeros_like(token_ids)}
                return np.asarray(forward({n: feed[n] for n in names}), "float32")

            self._runs[key] = run
        return self._runs[key]

    def encode(self, texts, batch_size, show_progress=None, compute="auto"):
        """`(pooled float32 (n, dim), number truncated)` of checked `texts`."""
        out = np.zeros((len(texts), self.encoder.embedding_dim), "float32")
        show = bool(show_progress or (show_progress is None and len(texts) > 8 * batch_size))
        first = bool(texts) and compute not in self.prepared
        with cold_start.first_call(self.encoder, compute, first, show_progress is not False and first):
            if not texts:
                return out, 0
            rows, truncated = self.encoder.preprocessor.host_token_ids(texts)
            pad = self.encoder.preprocessor.tokenizer.pad_token_id
            width = functools.partial(bucket_width, limit=self.encoder.preprocessor.sequence_length)
            batching.run_batches(self._runner(compute), rows, pad, batch_size, out, show, 1, width)
        self.prepared.add(compute)
        return out, int(np.sum(truncated))

    def warmup(self, compute="auto", verbose=True):
        """Compiles the forward pass of `compute` for short texts now; returns the seconds taken."""
        start = time.perf_counter()
        self.encode(list(WARMUP_TEXTS), 2, False if not verbose else None, compute)
        return time.perf_counter() - start
