"""Exact knowledge of whether Keras variables may have been written.

Why this exists: the inference engine keeps derived copies of the encoder's
weights (fused, cast, quantized, converted to TFLite) and must know exactly
when they are stale. Keras variables have no version and no write hook, and
comparing every weight on every call costs more than a single query (a full
read of all-MiniLM-L6-v2's 91 MB). A sampled fingerprint is cheap but misses
partial updates (a few embedding rows, one column). So every way Keras
writes a variable is counted here:

- an eager `assign` / `assign_add` / `assign_sub` (also what `set_weights`,
  `load_weights` and a restored backup run): a count on the variable;
- an optimizer's `apply` or `build` (`fit`, `train_on_batch`, custom loops,
  eagerly or traced into a `tf.function`): the optimizer is recorded with
  the variables it trains, the first time its `apply` runs or is traced;
  its own `iterations` variable then counts every step, compiled or not
  (and when the optimizer is garbage-collected, its variables count one
  eager write, so steps taken by an optimizer that is gone are not lost);
  `finalize_variable_values` (averaged EMA weights) counts as eager writes;
- a Keras `assign` traced into a graph outside an optimizer (a custom
  `tf.function` that writes weights): the variable is marked, and a
  `WriteWatch` over it reads a digest of all its values instead, since
  that graph may run at any time.

The hooks wrap `keras.Variable.assign` and three methods of
`keras.optimizers.Optimizer`; each calls the original unchanged and only
adds this bookkeeping (a Python counter, or nothing inside a graph).
Writes that bypass Keras (to the backend variable under `variable.value`)
are left to the sampled fingerprint of `sbert_keras.runtime.fused_graph.FusedWeights`.
"""

import threading
import weakref

import keras

from sbert_keras.compat import tensorflow as compat_tf
from sbert_keras.utils import backends
from sbert_keras.utils.backends import tensorflow as tf

_EAGER_WRITES = "_sbert_keras_eager_writes"
_GRAPH_WRITTEN = "_sbert_keras_graph_written"

_trained = weakref.WeakKeyDictionary()  # optimizer -> _Trained: the variables it updates
_applying = threading.local()  # depth of optimizer `apply` calls on this thread


def _note_write(variable):
    """Counts one write of `variable` (see the module docstring)."""
    if getattr(_applying, "depth", 0):
        return  # counted by the optimizer's `iterations`
    if tf.executing_eagerly():
        setattr(variable, _EAGER_WRITES, getattr(variable, _EAGER_WRITES, 0) + 1)
    else:
        setattr(variable, _GRAPH_WRITTEN, True)


class _Trained:
    """The variables an optimizer updates: their ids, and weak references for `_retire`."""

    def __init__(self):
        self.ids = frozenset()
        self.refs = []


def _retire(refs):
    """An optimizer is gone, and its `iterations` with it: its steps count as eager writes of its variables."""
    for ref in refs:
        variable = ref()
        if variable is not None:
            setattr(variable, _EAGER_WRITES, getattr(variable, _EAGER_WRITES, 0) + 1)


def _record(optimizer, variables):
    """Remembers that `optimizer` updates `variables` (until it is garbage-collected, then `_retire`)."""
    if variables is None:
        return
    trained = _trained.get(optimizer)
    if trained is None:
        trained = _trained[optimizer] = _Trained()
        weakref.finalize(optimizer, _retire, trained.refs)
    new = [v for v in variables if id(v) not in trained.ids]
    if new:
        trained.ids = trained.ids | {id(v) for v in new}
        trained.refs.extend(weakref.ref(v) for v in new)


def _install():
    """Wraps the Keras methods once per process."""
    variable_class = keras.Variable
    optimizer_class = keras.optimizers.Optimizer
    if getattr(variable_class.assign, "_sbert_keras_hook", False):
        return
    assign, build, apply, finalize = (
        variable_class.assign,
        optimizer_class.build,
        optimizer_class.apply,
        optimizer_class.finalize_variable_values,
    )

    def hooked_assign(self, value):
        result = assign(self, value)
        _note_write(self)
        return result

    def hooked_build(self, variables):
        _record(self, variables)
        return build(self, variables)

    def hooked_apply(self, grads, trainable_variables=None):
        _record(self, trainable_variables)
        _applying.depth = getattr(_applying, "depth", 0) + 1
        try:
            return apply(self, grads, trainable_variables)
        finally:
            _applying.depth -= 1

    def hooked_finalize(self, var_list):
        result = finalize(self, var_list)
        if getattr(self, "use_ema", False):
            for variable in var_list:
                _note_write(variable)
        return result

    hooked_assign._sbert_keras_hook = True
    variable_class.assign = hooked_assign
    optimizer_class.build = hooked_build
    optimizer_class.apply = hooked_apply
    optimizer_class.finalize_variable_values = hooked_finalize


if backends.uses_tensorflow():  # the fast routes it serves are TensorFlow graphs
    _install()


class WriteWatch:
    """Whether any of `variables` may have been written since the last `mark`.

    Exact for every write made through Keras (see the module docstring):
    `written()` is never False after such a write. It may be True after a
    step that left the values unchanged; callers then refresh once more.

    Args:
        variables: list of Keras variables.

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
        self._ids = frozenset(id(v) for v in self.variables)
        self._digest = None
        self._last = self.state()

    def _optimizers(self):
        """The recorded optimizers that update any of the variables."""
        return [opt for opt, trained in list(_trained.items()) if not trained.ids.isdisjoint(self._ids)]

    def state(self):
        """A value that changes whenever any of the variables is written."""
        eager = sum(getattr(v, _EAGER_WRITES, 0) for v in self.variables)
        steps = tuple((id(opt), int(opt.iterations.numpy())) for opt in self._optimizers())
        graph = [v for v in self.variables if getattr(v, _GRAPH_WRITTEN, False)]
        return eager, steps, self._digest_of(graph) if graph else None

    def _digest_of(self, variables):
        """A digest of every value of `variables` (for those written inside graphs of their own)."""
        if self._digest is None or self._digest[0] != len(variables):
            stack = tf.function(lambda: tf.stack([digest(v) for v in variables]))
            self._digest = (len(variables), compat_tf.traced_once(stack))
        return tuple(self._digest[1]().numpy().tolist())

    def mark(self, state=None):
        """Takes `state` (default: now) as the last refresh's."""
        self._last = self.state() if state is None else state

    def written(self, state=None):
        """Whether the variables may have been written since `mark` (`state`: one just taken)."""
        return (self.state() if state is None else state) != self._last


def digest(variable):
    """An int64 hash of every element of `variable`'s bits, position-weighted (graph-safe)."""
    flat = tf.reshape(variable.value, [-1])
    if flat.dtype.is_floating:
        bits = {2: tf.int16, 4: tf.int32, 8: tf.int64}[flat.dtype.size]
        flat = tf.bitcast(flat, bits)
    flat = tf.cast(flat, tf.int64)
    weights = tf.range(1, tf.size(flat, out_type=tf.int64) + 1) * 2654435761
    return tf.reduce_sum(flat * weights)
