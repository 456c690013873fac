"""The one interface of an inference route, and the runner it builds.

A route is one way to turn token ids into pooled float32 vectors (the Keras
graph, the fused graph, the XLA single query, XNNPACK int8). Each answers
three questions, and nothing else (`precision`, in the runtime's routes,
graphs and verdicts, is the resolved compute path of `encode(compute=...)`:
the dtype the matmuls run in, never the quantization of the output):

- `eligible(precision, size)`: may it serve this request on this host? The
  precision is resolved (`"auto"` already replaced); `size` is one of
  `SIZES`: `"one"` text, a `"few"` texts (a query: strings in, one call) or
  `"batch"` (length-sorted batches). Cheap: no graph runs.
- `check(precision)`: does it compute what the float32 Keras graph computes?
  The engine asks it once, through its one verdict table
  (`sbert_keras.runtime.self_check.VerdictTable`), and only for a `checked`
  route; `needs(precision)` names verdicts that must pass first.
- `build(precision)`: its `Runner`, built once per precision.

A `Runner` has one call for a few texts (`query`) and one for batches
(`batch`); when a query finds the weights changed behind Keras' back it
says so, and the engine calls `refresh` and asks once more.
"""

from sbert_keras.utils.backends import tensorflow as tf

# Request size classes: one text, a few texts in one call, length-sorted batches.
SIZES = ("one", "few", "batch")


class Runner:
    """What a route builds: a query call for a few texts and a batch call.

    Subclasses implement `query` and `batch`, and `refresh` when their query
    reads cached weights.
    """

    def query(self, texts):
        """`(pooled float32 array, number truncated, changed)` of a list of strings, in one call.

        `changed` is True when the weights it read were stale; the result is then
        not to be used: the engine calls `refresh` and `query` once more.
        """
        raise NotImplementedError

    def batch(self):
        """`run(token_ids, padding_mask)` for the batches of one `encode` call (weights synced now).

        `run` is safe to call from several threads; its `max_concurrency`
        attribute, where it has one, caps the batches in flight.
        """
        raise NotImplementedError

    def refresh(self):
        """Re-computes the cached weights that the last `query` found changed."""


class GraphRunner(Runner):
    """A `Runner` over a TensorFlow forward pass: queries run strings to vectors in one graph call.

    Args:
        graphs: the engine's `EncoderGraphs`.
        resolve: callable -> `(run, weights)`: the query's forward pass and
            the `FusedWeights` it reads (checked for changes in the same call).
        batch: callable -> `run(token_ids, padding_mask)` for batches.
    """

    def __init__(self, graphs, resolve, batch):
        self.graphs = graphs
        self._resolve, self._batch = resolve, batch
        self._read = ()

    def query(self, texts):
        run, weights = self._resolve()
        self._read = weights
        pooled, num_truncated, changed = self.graphs.strings.get(run, weights)(tf.constant(texts))
        return pooled.numpy(), int(num_truncated), bool(changed)

    def batch(self):
        return self._batch()

    def refresh(self):
        for weights in self._read:
            weights.sync(force=True)


class Route:
    """One way to run the encoder; see the module docstring.

    Args:
        graphs: the engine's `EncoderGraphs` (the encoder, its traced graphs and cast weights).
        host: the `hardware.Host` it runs on.
    """

    name = ""  # its key in the verdict table (and the on-disk verdict cache)
    kind = ""  # what `InferenceEngine.route` reports
    checked = True  # whether it proves itself against the float32 Keras graph before use
    tensorflow_graph = False  # whether a SavedModel can hold it

    def __init__(self, graphs, host):
        self.graphs, self.host = graphs, host

    @property
    def encoder(self):
        """The `SentenceEncoder` it runs."""
        return self.graphs.encoder

    def eligible(self, precision, size):
        """Whether it may serve `size` texts in `precision` (resolved) on this host."""
        raise NotImplementedError

    def needs(self, precision):
        """`(route name, precision)` pairs whose verdicts must pass before this one is checked."""
        return ()

    def check_key(self, precision):
        """Its `(name, precision)` in the verdict table."""
        return self.name, precision

    def check(self, precision):
        """Whether it computes what the float32 Keras graph does (warns when not)."""
        return True

    def build(self, precision):
        """Its `Runner` in `precision`."""
        raise NotImplementedError
