"""What an inference route declares, the runner it builds, and the registry of routes.

A route is one way to turn token ids into pooled float32 vectors (the Keras
graph, the fused graph, the XLA single query, XNNPACK int8). It describes
itself, and the engine's choice is a filter and a sort over those
descriptions (`route_choice.RouteChoice.candidates`), with no condition
that names a route.
(`precision`, in the runtime's routes, graphs and verdicts, is the resolved
compute path of `encode(compute=...)`: the dtype the matmuls run in, never
the quantization of the output.)

What a route declares (class attributes and cheap methods; no graph runs):

- `name`: its key in `engine.routes`, in the verdict table (and on disk),
  and what `InferenceEngine.route` reports;
- `rank`: the higher, the earlier it is tried in a compute path;
- `computes`: the compute paths it serves, and `serves(precision)` whether
  it serves one for this encoder: a route that `dequantizes` (reads the
  int8 weights of an encoder quantized by Keras as float ones, as the
  fused graph does) serves such an encoder only in a path checked in int8.
  In a float path it would compute float activations where the Keras
  graph's int8 layers round them, an answer its float32 check refuses;
- `sizes`: the size classes of `SIZES` it serves;
- `usable()`: whether this host and encoder can run it at all (a GPU, CPU
  flags, TFLite, an encoder the fused graph reproduces);
- `fast(precision)`: whether `compute="auto"` may pick it in `precision`;
- `races`: the routes it must outrun to serve (each timed
  on this machine, `route_choice.race`, and again later until two timings
  agree; one that does not serve the same size and compute, or fails its
  check, is no rival): a route whose speed over the others depends on the
  model's size and the CPU;
- `warm(precision, size)`: whether its graphs for a race of that size were
  built in this process, so that timing the race again builds nothing;
- `ready(precision)`: whether its first build does no long one-off work
  (XNNPACK's: converting the model, until the converted model is on disk).
  A route that `builds_on` another and is not ready serves no call until
  `encoder.warmup()` builds it: the route it builds on answers the first
  call instead of a conversion of tens of seconds at base size;
- `exportable`, and `forward(precision)`: the compute paths a SavedModel
  can hold it in (float ones only: `defaults.EXPORT_COMPUTES`), and the
  TensorFlow forward pass it stores;
- `checked`, `check_in` and `builds_on`: whether it proves itself against
  the float32 Keras graph before use (`check(precision)`, asked once
  through the engine's verdict table), the one compute path its check runs
  in when its graph computes in one for all, and the route whose graph it
  runs too: that route's verdicts must pass first, and a runner built for
  it stands in for that route's runner;
- `token_steps`: for a route that `builds_on` another, the padded sizes of
  one call (texts times padded length) at which it races that route, then
  sizes between the last it won and the first it lost, each timed until two
  timings agree (`route_choice.Races.token_bound`): its runner hands a call
  of more tokens than the largest size it won to that route, the two
  engines' crossover measured, not guessed.

`build(precision)` gives its `Runner`: one call for a few texts (`query`)
and one for batches (`batch`); a route with `token_steps` takes
`build(precision, max_tokens)`, the bound its races set (a callable:
a race timed again later may move it). When a query
finds the weights changed behind Keras' back it says so, and the engine
calls `refresh` and asks once more.

A route joins the engine with `@register` on its class (`unregister` takes
it out); engines made afterwards try it.
"""

from sbert_keras.utils.backends import tensorflow as tf

# Request size classes: one text, a few texts in one call, length-sorted batches.
SIZES = ("one", "few", "batch")
# The registered route classes, in the order they were registered (`register`).
REGISTRY = []


def register(route_class):
    """Class decorator: adds `route_class` to the routes the engines made from now on try.

    Example:
    ```python
    @register
    class MyRoute(Route):
        name, rank, computes = "mine", 50, ("float32",)
    ```
    """
    if any(other.name == route_class.name for other in REGISTRY):
        raise ValueError(f"A route named {route_class.name!r} is registered already.")
    REGISTRY.append(route_class)
    return route_class


def unregister(route_class):
    """Takes `route_class` out of the registry (engines made before keep it)."""
    REGISTRY.remove(route_class)


def registered():
    """The registered route classes, highest `rank` first."""
    return sorted(REGISTRY, key=lambda route_class: -route_class.rank)


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


def fused_runner(graphs, precision):
    """The `GraphRunner` of the fused graph in `precision`.

    What the fused route builds, and what a route that `builds_on` it runs
    for the requests it passes on.

    Args:
        graphs: the engine's `EncoderGraphs`.
        precision: a compute path of the fused graph.
    """

    def resolve():
        weights = graphs.current_weights(precision)
        return graphs.fused_function(precision, weights), (weights,)

    return GraphRunner(graphs, resolve, lambda: graphs.fused_function(precision))


class Route:
    """One way to run the encoder, and what it declares; see the module docstring.

    Args:
        graphs: the engine's `EncoderGraphs` (the encoder, its traced graphs and cast weights).
        host: the `hardware.Host` it runs on.

    Example:
    ```python
    route = FusedRoute(graphs, host)
    route.usable() and route.serves("bfloat16") and route.check("bfloat16")
    run = route.build("bfloat16").batch()
    ```
    """

    name = ""  # its key in `engine.routes` and the verdict table; what `InferenceEngine.route` reports
    rank = 0  # the higher, the earlier it is tried
    computes = ()  # the compute paths it serves
    sizes = SIZES  # the size classes it serves
    exportable = ()  # the compute paths a SavedModel can hold it in (`forward`)
    checked = True  # whether it proves itself against the float32 Keras graph before use
    check_in = None  # the one compute path its check runs in (None: the path it serves)
    builds_on = None  # the name of the route whose graph it runs too
    races = ()  # the names of the routes it must answer faster than to serve
    token_steps = ()  # the call sizes (padded tokens) at which it races the route it builds on
    dequantizes = False  # whether it reads a Keras-quantized encoder's int8 weights as float ones (`serves`)

    def __init__(self, graphs, host):
        self.graphs, self.host = graphs, host

    @property
    def encoder(self):
        """The `SentenceEncoder` it runs."""
        return self.graphs.encoder

    def usable(self):
        """Whether this host and encoder can run it at all (devices, CPU flags, libraries)."""
        return True

    def serves(self, precision):
        """Whether it serves `precision` for this encoder: one of `computes`, checked in int8 where it `dequantizes`
        an encoder quantized by Keras (module docstring)."""
        if precision not in self.computes:
            return False
        return not (self.dequantizes and self.graphs.quantized()) or (self.check_in or precision) == "int8"

    def fast(self, precision):
        """Whether `compute="auto"` may pick it in `precision` (a path it serves) on this host."""
        return True

    def check(self, precision):
        """Whether it computes what the float32 Keras graph does (warns when not)."""
        return True

    def warm(self, precision, size):
        """Whether a race of `size` texts in `precision` would build nothing (its graph was built here)."""
        return False

    def ready(self, precision):
        """Whether its first build in `precision` does no long one-off work (module docstring)."""
        return True

    def build(self, precision):
        """Its `Runner` in `precision` (with `token_steps`: `build(precision, max_tokens)`, module docstring)."""
        raise NotImplementedError

    def forward(self, precision):
        """`(forward, trackables)` in a compute path of `exportable`: its untraced TensorFlow forward pass.

        `forward(token_ids, padding_mask)` -> float32 vectors; `trackables`:
        the objects holding the variables it reads.
        """
        raise NotImplementedError(f"The {self.name!r} route cannot be exported.")
