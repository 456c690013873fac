"""The inference engine behind `encode`, `predict`, queries and the exported SavedModel.

Why this exists: Keras' `predict` pads every text to the full sequence length
and runs the generic graph; sentence encoding wants smart batching, one
traced function for every shape, cached low-precision copies of the weights and
the fastest route that is proven to compute what the Keras graph computes.
Neither Keras nor KerasHub has such an engine, so it is here.

`InferenceEngine` owns, per encoder and `hardware.Host` (injected; this
machine's by default):

- the routes (`sbert_keras.runtime.routes`: XNNPACK int8, the XLA single
  query, the fused graph, the Keras graph), tried in that order for a
  request (`candidates`) and chosen once per (compute, size class)
  (`select`): the first that is eligible and passes its self-check;
- the one table of self-check verdicts (`self_check.VerdictTable`, also on
  disk): each route is checked once against the float32 Keras graph, and a
  failure warns once and falls back to the next route;
- the one stale-weights retry (`query`): a query whose graph call finds the
  weights changed behind Keras' back refreshes them and runs once more;
- the encode path (`encode`): a few texts in one query call, more in
  length-sorted batches (`sbert_keras.runtime.batching`) over the runner's
  batch call. Truncation reports, truncation to `truncate_dim` and the
  normalisation follow in `sbert_keras.encoding`.

`"auto"` means float16 on a GPU, bfloat16 on a CPU with AVX512-BF16 or AMX,
float32 otherwise (`Host.auto_precision`), and int8 for an encoder quantized
by Keras where int8 matmuls are exact; always the fastest that passes.
`"float16"` on a machine without a GPU runs as bfloat16 (or float32 without
AVX512-BF16/AMX), with one warning (`Host.runnable_precision`): TensorFlow
has no fast float16 matmul on a CPU.
"""

import time
import warnings

import numpy as np

from sbert_keras.runtime import batching
from sbert_keras.runtime import cold_start
from sbert_keras.runtime import self_check
from sbert_keras.runtime.graphs import EncoderGraphs
from sbert_keras.runtime.kernels import onednn_int8 as int8
from sbert_keras.runtime.routes.fused import FusedRoute
from sbert_keras.runtime.routes.keras_graph import KerasGraphRoute
from sbert_keras.runtime.routes.xla_query import XlaQueryRoute
from sbert_keras.runtime.routes.xnnpack_int8 import XnnpackInt8Route
from sbert_keras.utils import hardware
from sbert_keras.utils.defaults import COMPUTES
from sbert_keras.utils.defaults import CONCURRENT_BATCHES

ROUTES = (XnnpackInt8Route, XlaQueryRoute, FusedRoute, KerasGraphRoute)
# Texts of different lengths for `warmup`: a single query, then batches of two.
WARMUP_TEXTS = (
    "A man is playing a guitar.",
    "A dog runs in the park.",
    "Two women are sitting on a bench in the park, talking about the weather and the news.",
)


def resolve_compute(compute, host=None):
    """`compute` checked; `"auto"` (or None) replaced by `host.auto_precision()` (default host: this machine)."""
    if compute is None:
        compute = "auto"
    if compute not in COMPUTES:
        raise ValueError(f"`compute` must be one of {COMPUTES}. Received {compute!r}.")
    return (host or hardware.current_host()).auto_precision() if compute == "auto" else compute


def runnable_compute(compute, host, encoder, warned):
    """`host.runnable_precision(compute)`; a redirection warns once per compute in `warned` (a set).

    The warning names what runs instead (float16 on a CPU: bfloat16 or float32).
    """
    runs = host.runnable_precision(compute)
    if runs != compute and compute not in warned:
        warned.add(compute)
        warnings.warn(
            f"compute={compute!r} has no fast kernels on a CPU (TensorFlow's float16 matmuls run at "
            f"about one text per second); {encoder.name!r} runs in {runs} instead. Pass "
            f"compute={runs!r} (or 'auto') to silence this.",
            stacklevel=6,
        )
    return runs


class InferenceEngine:
    """Runs a `SentenceEncoder` for inference through the fastest route that passes its self-check.

    Args:
        encoder: a `SentenceEncoder`.
        host: a `hardware.Host`, or None for `hardware.current_host()`.

    Example:
    ```python
    engine = InferenceEngine(encoder, host=Host(cpu_flags={"avx2"}))
    engine.route("auto")  # ("fused", "float32")
    pooled, num_truncated = engine.encode(["a text"], batch_size=32)  # float32, not L2-normalised
    ```
    """

    def __init__(self, encoder, host=None):
        self.encoder = encoder
        self.host = host or hardware.current_host()
        self.graphs = EncoderGraphs(encoder, self.host)
        self.verdicts = self_check.VerdictTable(encoder, self.host)
        self.routes = {route.name: route(self.graphs, self.host) for route in ROUTES}
        self._choices = {}  # (requested compute, size, TensorFlow graphs only) -> (route, compute)
        self._runners = {}  # (route name, compute) -> its Runner
        self.prepared = set()  # compute paths, and (compute, size), whose first call is done (`cold_start.first_call`)
        self._warned = set()  # compute paths run as another (`runnable_compute`), warned about once

    @property
    def trace_count(self):
        """How many forward passes were traced (each traces once)."""
        return self.graphs.trace_count

    def invalidate(self):
        """Marks the cast weights stale: they are re-computed on the next call."""
        self.graphs.invalidate()

    def fused_weights(self, compute, force=False):
        """The fused graph's `FusedWeights` of `compute` (see `EncoderGraphs.fused_weights`)."""
        return self.graphs.fused_weights(compute, force)

    def keras_model(self, compute):
        """The encoder, or its copy computing in `compute` (see `graphs.keras_model_for`)."""
        return self.graphs.keras_model(compute)

    def candidates(self, compute):
        """`(route name, resolved compute)` pairs in the order tried for `compute`."""
        auto, quantized = compute in (None, "auto"), self.graphs.quantized()
        resolved = runnable_compute(resolve_compute(compute, self.host), self.host, self.encoder, self._warned)
        order = [(XnnpackInt8Route.name, "int8")] if compute == "int8" or (auto and quantized) else []
        if auto and quantized and int8.int8_matmul_available(self.host):
            resolved = "int8"  # an encoder quantized by Keras runs its int8 weights
        order += [(XlaQueryRoute.name, resolved), (FusedRoute.name, resolved)]
        if auto and resolved != "float32":
            order += [(XlaQueryRoute.name, "float32"), (FusedRoute.name, "float32")]
        # Keras has no int8 policy: a float encoder falls back to its float32 graph.
        return order + [(KerasGraphRoute.name, "float32" if auto or resolved == "int8" else resolved)]

    def passes(self, name, compute):
        """Whether route `name` may serve `compute`: what it needs passes, and its own verdict (checked once)."""
        route = self.routes[name]
        if not route.checked:
            return True
        if not all(self.passes(*need) for need in route.needs(compute)):
            return False
        return self.verdicts.verdict(*route.check_key(compute), lambda: route.check(compute))

    def select(self, compute="auto", size="batch", tensorflow_graph=False):
        """`(route, resolved compute)` for `size` texts (`routes.base.SIZES`), chosen once.

        `tensorflow_graph`: only routes a SavedModel can hold (the export's `plan`).
        """
        key = (compute, size, tensorflow_graph)
        if key not in self._choices:
            for name, resolved in self.candidates(compute):
                route = self.routes[name]
                usable = route.tensorflow_graph or not tensorflow_graph
                if usable and route.eligible(resolved, size) and self.passes(name, resolved):
                    self._choices[key] = (route, resolved)
                    break
        return self._choices[key]

    def runner_for(self, compute="auto", size="batch", like_export=False):
        """The `Runner` of `select(compute, size, like_export)`, built once."""
        route, resolved = self.select(compute, size, like_export)
        single = self._runners.get((XlaQueryRoute.name, resolved))  # it runs this same fused graph for 2+ texts
        if size == "few" and not like_export and route.kind == FusedRoute.kind and single is not None:
            return single  # no second trace of the same graph
        if (route.name, resolved) not in self._runners:
            self._runners[route.name, resolved] = route.build(resolved)
        return self._runners[route.name, resolved]

    def route(self, compute="auto"):
        """`(kind, compute)` that batches run: `("xnnpack" | "fused" | "keras", compute)`."""
        route, resolved = self.select(compute, "batch")
        return route.kind, resolved

    def plan(self, compute="auto"):
        """`("fused" | "keras", compute)`: what a SavedModel serves (TensorFlow graphs only)."""
        route, resolved = self.select(compute, "batch", tensorflow_graph=True)
        return route.kind, resolved

    def check(self, compute):
        """Whether the fused graph may serve `compute` (self-check on first use)."""
        return self.routes[FusedRoute.name].eligible(compute, "batch") and self.passes(FusedRoute.name, compute)

    def runner(self, compute="auto", like_export=False):
        """`run(token_ids, padding_mask)` -> pooled float32 vectors, for the batches of one call."""
        return self.runner_for(compute, "batch", like_export).batch()

    def query(self, texts, compute="auto", like_export=False):
        """`(pooled, number truncated)` of a few texts in one call; weights found stale are refreshed once."""
        runner = self.runner_for(compute, "one" if len(texts) == 1 else "few", like_export)
        pooled, num_truncated, changed = runner.query(texts)
        if changed:  # written behind Keras' back since the last refresh
            runner.refresh()
            pooled, num_truncated, _ = runner.query(texts)
        return pooled, num_truncated

    def encode(self, texts, batch_size, show_progress=None, compute="auto", like_export=False):
        """`(pooled float32 (n, dim), number truncated)` of checked `texts`; a status line on a first call.

        A few texts without a progress bar go in one `query` call, more in length-sorted batches
        (`batching.run_batches`). `like_export`: only the routes a SavedModel holds (`plan`).
        """
        out = np.zeros((len(texts), self.encoder.embedding_dim), "float32")
        show = bool(show_progress or (show_progress is None and len(texts) > 8 * batch_size))
        key = (compute, "batch" if len(texts) > batch_size or show else "one" if len(texts) == 1 else "few")
        verbose = show_progress is not False and compute not in self.prepared  # self-checks, compilation ahead
        with cold_start.first_call(self.encoder, compute, bool(texts) and key not in self.prepared, verbose):
            if not texts:
                return out, 0
            if len(texts) <= batch_size and not show:
                out, num_truncated = self.query(texts, compute, like_export)
            else:
                ids, num_truncated = self.encoder.preprocessor.tokenize(texts)
                run = self.runner(compute, like_export)
                # An `xnnpack_int8.Runner` spreads each call over all cores itself (`max_concurrency` 1).
                concurrency = 1 if self.host.gpu else getattr(run, "max_concurrency", CONCURRENT_BATCHES)
                pad = self.encoder.preprocessor.tokenizer.pad_token_id
                batching.run_batches(run, ids, pad, batch_size, out, show, concurrency)
        self.prepared.update((compute, key))
        return out, num_truncated

    def warmup(self, compute="auto", verbose=True):
        """Runs every first-use self-check and compilation of `compute` now; returns the seconds taken."""
        start = time.perf_counter()
        with cold_start.first_call(self.encoder, compute, True, verbose and compute not in self.prepared):
            self.query(list(WARMUP_TEXTS[:1]), compute)
            self.encode(list(WARMUP_TEXTS), 2, False, compute)  # batches of two
        self.prepared.add(compute)
        return time.perf_counter() - start
