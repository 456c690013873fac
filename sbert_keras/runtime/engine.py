"""The inference engine behind `encode`, `predict`, queries and the exported SavedModel.

Why this exists: Keras' `predict` pads every text to the full sequence length
and runs the generic graph; sentence encoding wants smart batching, one
traced function for every shape, cached low-precision copies of the weights and
the fastest route that is proven to compute what the Keras graph computes.
Neither Keras nor KerasHub has such an engine, so it is here.

`InferenceEngine` owns, per encoder and `hardware.Host` (injected; this
machine's by default):

- the routes (`sbert_keras.runtime.routes`, every registered one: XNNPACK
  int8, the XLA single query, the fused graph, the Keras graph), chosen once
  per (compute, size class) (`select`) by a filter and sort over what each
  declares (`route_choice.RouteChoice`); the first that passes its
  self-check serves, and its runner is built once (`runner_for`);
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

import numpy as np

from sbert_keras.runtime import batching
from sbert_keras.runtime import cold_start
from sbert_keras.runtime.graphs import EncoderGraphs
from sbert_keras.runtime.route_choice import RouteChoice
from sbert_keras.runtime.route_choice import resolve_compute  # noqa: F401 - also read from here
from sbert_keras.utils import hardware
from sbert_keras.utils.defaults import CONCURRENT_BATCHES

# Texts of different lengths for `warmup`: a single query, then batches of two.
WARMUP_TEXTS = (
    "A man is playing a guitar.",
    "A dog runs in the park.",
    "Two women are sitting on a bench in the park, talking about the weather and the news.",
)


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
        self.choice = RouteChoice(encoder, self.graphs, self.host)
        self.routes, self.verdicts = self.choice.routes, self.choice.verdicts
        self._runners = {}  # (route name, compute) -> its Runner
        self.prepared = set()  # compute paths, and (compute, size), whose first call is done (`cold_start.first_call`)

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

    def runner_for(self, compute="auto", size="batch"):
        """The `Runner` of `select(compute, size)`, built once.

        A runner already built for a route that builds on the chosen one
        serves instead (its graph holds the chosen route's: no second trace).
        """
        route, resolved = self.choice.select(compute, size)
        for other in self.routes.values():
            if other.builds_on == route.name and (other.name, resolved) in self._runners:
                return self._runners[other.name, resolved]
        if (route.name, resolved) not in self._runners:
            self._runners[route.name, resolved] = self.choice.build(route, resolved)
        return self._runners[route.name, resolved]

    def grouped(self, compute="auto"):
        """`run(token_ids, padding_mask, token_ids, padding_mask)`: two padded batches in one call, or None.

        Where batches run the fused graph on a CPU and its graph of two
        batches passes its self-check (`FusedRoute.check_groups`, a verdict of
        its own): their rows share each matmul, so a small model's matmuls
        get twice the rows (`batching.run_batches`).
        """
        route, resolved = self.choice.select(compute, "batch")
        return self.graphs.fused_function(resolved, groups=2) if self.groups_pass(route, resolved) else None

    def groups_pass(self, route, resolved):
        """Whether batches through `route` in `resolved` may go two a call (`grouped`, SavedModels).

        The fused route on a CPU, once its graph of two batches has passed
        `FusedRoute.check_groups` (the verdict `"fused_groups"`).
        """
        if route.name != "fused" or self.host.gpu:
            return False
        return self.verdicts.verdict("fused_groups", resolved, lambda: route.check_groups(resolved))

    def select(self, compute="auto", size="batch", exportable=False):
        """`(route, resolved compute)` for `size` texts, chosen once (`RouteChoice.select`)."""
        return self.choice.select(compute, size, exportable)

    def route(self, compute="auto"):
        """`(route name, compute)` that batches run: `("xnnpack" | "fused" | "keras", compute)`."""
        route, resolved = self.choice.select(compute, "batch")
        return route.name, resolved

    def plan(self, compute="auto"):
        """`(route name, compute)` of what a SavedModel serves (exportable routes only): `("fused" | "keras", ...)`."""
        route, resolved = self.choice.select(compute, "batch", exportable=True)
        return route.name, resolved

    def check(self, compute, name="fused"):
        """Whether route `name` (the fused graph by default) may serve `compute` (self-check on first use)."""
        route = self.routes[name]
        return route.serves(compute) and route.usable() and self.choice.passes(name, compute)

    def runner(self, compute="auto"):
        """`run(token_ids, padding_mask)` -> pooled float32 vectors, for the batches of one call."""
        return self.runner_for(compute, "batch").batch()

    def query(self, texts, compute="auto"):
        """`(pooled, number truncated)` of a few texts in one call; weights found stale are refreshed once."""
        runner = self.runner_for(compute, "one" if len(texts) == 1 else "few")
        pooled, num_truncated, changed = runner.query(texts)
        if changed:  # written behind Keras' back since the last refresh
            runner.refresh()
            pooled, num_truncated, _ = runner.query(texts)
        return pooled, num_truncated

    def encode(self, texts, batch_size, show_progress=None, compute="auto"):
        """`(pooled float32 (n, dim), number truncated)` of checked `texts`; a status line on a first call.

        A few texts without a progress bar go in one `query` call, more in length-sorted batches
        (`batching.run_batches`).
        """
        out = np.zeros((len(texts), self.encoder.embedding_dim), "float32")
        show = bool(show_progress or (show_progress is None and len(texts) > 8 * batch_size))
        key = (compute, "batch" if len(texts) > batch_size or show else "one" if len(texts) == 1 else "few")
        verbose = show_progress is not False and compute not in self.prepared  # self-checks, compilation ahead
        with cold_start.first_call(self.encoder, compute, bool(texts) and key not in self.prepared, verbose):
            if not texts:
                return out, 0
            if len(texts) <= batch_size and not show:
                out, num_truncated = self.query(texts, compute)
            else:
                ids, num_truncated = self.encoder.preprocessor.tokenize(texts)
                run, grouped = self.runner(compute), self.grouped(compute)
                # An `xnnpack.Runner` spreads each call over all cores itself (`max_concurrency` 1).
                concurrency = 1 if self.host.gpu else getattr(run, "max_concurrency", CONCURRENT_BATCHES)
                pad = self.encoder.preprocessor.tokenizer.pad_token_id
                batching.run_batches(run, ids, pad, batch_size, out, show, concurrency, grouped=grouped)
        self.prepared.update((compute, key))
        return out, num_truncated

    def warmup(self, compute="auto", verbose=True):
        """Runs every first-use self-check and compilation of `compute` now; returns the seconds taken.

        Also builds the routes a first call leaves out (not `ready`: XNNPACK's
        float32 single query on a CPU with AVX-512 converts the model), and
        races them.
        """
        start = time.perf_counter()
        with cold_start.first_call(self.encoder, compute, True, verbose and compute not in self.prepared):
            with self.choice.preparing():
                self.query(list(WARMUP_TEXTS[:1]), compute)
                self.query(list(WARMUP_TEXTS[:2]), compute)
                self.encode(list(WARMUP_TEXTS), 2, False, compute)  # batches of two
        self.prepared.add(compute)
        return time.perf_counter() - start
