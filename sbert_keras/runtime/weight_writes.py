"""Exact knowledge of whether an encoder's weights may have been written.

Why this exists: the inference engine keeps derived copies of the encoder's
weights (fused, cast, quantized, converted to TFLite) and must know exactly
when they are stale. Keras variables have no version and no write hook, and
comparing every weight on every call costs more than a single query (a full
read of all-MiniLM-L6-v2's 91 MB). A sampled fingerprint is cheap but misses
partial updates (a few embedding rows, one column). So every write made to
the encoder's own variables is counted here, and nothing else is touched:
no class of Keras or TensorFlow is changed, and a user's other models run
exactly as they would without this package.

`install(variables)` puts instance-level write hooks on those variables only
(TensorFlow backend): an instance attribute shadowing the write methods of
each Keras variable (`KERAS_WRITES`) and of the TensorFlow variable under it
(`variable.value`, `TENSORFLOW_WRITES`: Keras' TensorFlow optimizers write
there directly, sparse gradients through `scatter_*`). Each hook runs the
class's own method unchanged, then counts one write on the variables'
`Ledger`:

- called eagerly (`assign`, `set_weights`, `load_weights`, a restored
  backup, an eager optimizer step, EMA's `finalize_variable_values`): a
  Python counter;
- called while a graph is traced (a compiled train step, `train_on_batch`,
  a custom `tf.function`): an in-graph `assign_add(1)` on the ledger's
  int64 counter variable, once per traced graph (a branch or loop body is
  a graph of its own), so every step that graph runs is counted, whoever
  traced it, and even after its optimizer is garbage-collected.

`WriteWatch.state()` is then the Python counters plus, only for a ledger
that a graph ever wrote, one scalar read of its counter. `SentenceEncoder`
installs the hooks on its backbone when it is built, before any training
graph that writes it can be traced; `WriteWatch` installs them on any
variable it watches that has none.

A copy of a hooked variable (`copy.deepcopy`, pickling) gets pass-through
methods that count nothing: it never writes, nor counts on, the original.
Writes that bypass every variable method (raw ops on the handle, a
`tf.train.Checkpoint` restore) are left to the sampled fingerprint of
`sbert_keras.runtime.fused_graph.FusedWeights`. Under JAX and PyTorch
nothing is installed: the host engine derives no copies it keeps.

Example:
```python
watch = WriteWatch(encoder.backbone.weights)
encoder.backbone.token_embedding.embeddings.assign(table)
watch.written()  # True
```
"""

import weakref

import keras

from sbert_keras.compat import tensorflow as compat_tf
from sbert_keras.utils.backends import tensorflow as tf

KERAS_WRITES = ("assign", "assign_add", "assign_sub")
TENSORFLOW_WRITES = (
    "assign",
    "assign_add",
    "assign_sub",
    "scatter_add",
    "scatter_sub",
    "scatter_update",
    "scatter_max",
    "scatter_min",
    "scatter_mul",
    "scatter_div",
    "batch_scatter_update",
    "scatter_nd_add",
    "scatter_nd_sub",
    "scatter_nd_update",
    "scatter_nd_max",
    "scatter_nd_min",
)


class Ledger:
    """The writes counted on a group of hooked variables: eager ones in Python, traced ones in a variable.

    Example:
    ```python
    ledger = Ledger()
    ledger.count()  # eagerly: one Python count
    ledger.state()  # (1, 0)
    ```
    """

    def __init__(self):
        self.eager = 0
        self.traced = False  # whether any graph ever counted here (the counter is read only then)
        self._graphs = weakref.WeakSet()  # the traced graphs that already count a write
        self.counter = compat_tf.unmirrored_variable(0, "int64")

    def count(self):
        """Counts one write: eagerly, at once; while tracing, when the graph runs (once per graph)."""
        if tf.executing_eagerly():
            self.eager += 1
            return
        graph = tf.compat.v1.get_default_graph()
        if graph not in self._graphs:  # every stateful op of a traced graph runs when the graph does
            self._graphs.add(graph)
            self.traced = True
            self.counter.assign_add(1)

    def state(self):
        """`(eager writes, writes by graphs that ran)`: changes whenever a hooked variable is written."""
        return self.eager, int(self.counter.numpy()) if self.traced else 0


class WriteHook:
    """One write method of one variable: the class's method, then one count on `ledger` (None: no count).

    Set as an instance attribute of `owner` (named `name`), so only this
    object is changed. A copy of `owner` gets a hook that counts nothing.

    Args:
        owner: a Keras or TensorFlow variable.
        name: str. The method, for example `"assign"`.
        ledger: a `Ledger`, or None.
    """

    __slots__ = ("owner", "name", "ledger")

    def __init__(self, owner, name, ledger):
        self.owner, self.name, self.ledger = owner, name, ledger

    def __call__(self, *args, **kwargs):
        result = getattr(type(self.owner), self.name)(self.owner, *args, **kwargs)
        if self.ledger is not None:
            self.ledger.count()
        return result

    def __reduce__(self):  # deepcopy and pickle: bound to the copy of `owner`, counting on no ledger
        return WriteHook, (self.owner, self.name, None)

    def __repr__(self):
        return f"<{type(self.owner).__name__}.{self.name}, write counted>"


def _targets(variable):
    """`(object, method names)` to hook for `variable`: the Keras variable, its TensorFlow variable(s)."""
    value = variable
    if isinstance(variable, keras.Variable):
        yield variable, KERAS_WRITES
        value = variable.value
    if isinstance(value, tf.Variable):
        yield value, TENSORFLOW_WRITES
        if isinstance(value, tf.distribute.DistributedValues):  # a strategy updates each replica's copy
            for component in value.distribute_strategy.experimental_local_results(value):
                yield component, TENSORFLOW_WRITES


def ledger_of(variable):
    """The `Ledger` that counts `variable`'s writes, or None if it has no live hook."""
    hook = vars(variable).get("assign")
    return hook.ledger if isinstance(hook, WriteHook) else None


def install(variables):
    """Hooks the writes of `variables` (Keras or TensorFlow variables); returns their distinct ledgers.

    Idempotent: a hooked variable keeps its ledger (its TensorFlow variable,
    if Keras replaced it, is hooked again); the others share one new ledger.
    """
    ledgers, new = {}, None
    for variable in variables:
        ledger = ledger_of(variable)
        if ledger is None:
            new = new or Ledger()
            ledger = new
        ledgers[id(ledger)] = ledger
        for target, names in _targets(variable):
            if ledger_of(target) is ledger:
                continue
            for name in names:
                if hasattr(type(target), name):
                    setattr(target, name, WriteHook(target, name, ledger))
    return list(ledgers.values())


def is_hooked(variable):
    """Whether `variable` (or the TensorFlow variable under a Keras one) carries a write hook of this module."""
    return any(isinstance(vars(target).get(name), WriteHook) for target, names in _targets(variable) for name in names)


class WriteWatch:
    """Whether any of `variables` may have been written since the last `mark`.

    Exact for every write made through a variable's methods (see the
    module docstring): `written()` is never False after such a write. It may
    be True after a write that left the values unchanged, or after a write
    to another variable of the same ledger; callers then refresh once more.

    Args:
        variables: list of Keras variables (hooked here if they are not yet).

    Example:
    ```python
    watch = WriteWatch(encoder.backbone.weights)
    encoder.backbone.token_embedding.embeddings.assign(table)
    watch.written()  # True
    watch.mark()
    watch.written()  # False
    ```
    """

    def __init__(self, variables):
        self.variables = list(variables)
        self.ledgers = install(self.variables)
        self._last = self.state()

    def state(self):
        """A value that changes whenever any of the variables is written."""
        return tuple(ledger.state() for ledger in self.ledgers)

    def mark(self, state=None):
        """Takes `state` (default: now) as the last refresh's."""
        self._last = self.state() if state is None else state

    def written(self, state=None):
        """Whether the variables may have been written since `mark` (`state`: one just taken)."""
        return (self.state() if state is None else state) != self._last
