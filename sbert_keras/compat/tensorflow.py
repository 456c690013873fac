"""Reads of TensorFlow's private modules, each checked against TensorFlow 2.21.0.

Why this exists: oneDNN's fused ops (`_MklLayerNorm`, `_QuantizedMatMul`,
`_MklNativeFusedMatMul`) have a leading underscore, so `tf.raw_ops` does
not list them; they are built inside a graph through TensorFlow's private
op-definition library (`op_def_library._apply_op_helper`, and
`Operation._set_attr` for a kernel label), and whether a build registers them is
asked of `op_def_registry`. Both live in `tensorflow.python.framework`,
which is not public API, so every such use goes through this module.

`traced_once` marks a `tf.function` that is traced once per instance by
design (the runtime builds one per encoder, precision and route from the
same Python code): TensorFlow counts the traces of every instance of that
code together and, past five, logs a "triggered tf.function retracing"
warning that the user did not cause. The switch TensorFlow keeps for this
(`_omit_frequent_tracing_warning`, what Keras 2 set on its train functions)
is private.

`unmirrored_variable` creates the write counter of `runtime.weight_writes`
as one plain variable even inside a distribution strategy's scope: a plain
variable may be updated from any replica, where a mirrored one without an
aggregation may not. `tf.Variable` hands creation to the strategy; calling
TensorFlow's `ResourceVariable` class directly (`resource_variable_ops`,
private) does not.

Example:
```python
if op_registered("_MklLayerNorm"):
    op = apply_op("_MklLayerNorm", name="LayerNorm", x=x, scale=gamma, offset=beta, epsilon=1e-12)
```


TensorFlow is optional (`utils.backends`): the private modules are imported
by the functions that read them, which only the TensorFlow paths call.
"""

from sbert_keras.utils.backends import tensorflow as tf

CHECKED_TENSORFLOW_VERSION = "2.21.0"


def op_registered(op_type):
    """Whether this TensorFlow build registers the op `op_type` (TensorFlow 2.21.0 `op_def_registry.get`)."""
    from tensorflow.python.framework import op_def_registry

    return op_def_registry.get(op_type) is not None


def apply_op(op_type, name, kernel_label=None, **arguments):
    """Adds one op of `op_type` to the graph being traced; returns the `tf.Operation`.

    TensorFlow 2.21.0 `op_def_library._apply_op_helper`: inputs and
    attributes are given by their names in the op's definition. A kernel
    registered under a label (`_MklNativeFusedMatMul`'s `"MklNameChangeOp"`)
    is selected by the node's `_kernel` attribute, which no op definition
    lists: it is set with TensorFlow 2.21.0 `Operation._set_attr`.

    Args:
        op_type: str. The registered op name (e.g. `"_MklLayerNorm"`).
        name: str. The node's name.
        kernel_label: str or None. The label of the kernel to run.
        **arguments: the op's inputs and attributes.
    """
    from tensorflow.core.framework import attr_value_pb2
    from tensorflow.python.framework import op_def_library

    _, _, op, _ = op_def_library._apply_op_helper(op_type, name=name, **arguments)
    if kernel_label is not None:
        op._set_attr("_kernel", attr_value_pb2.AttrValue(s=kernel_label.encode()))
    return op


def traced_once(function):
    """`function` (a `tf.function`), left out of TensorFlow's frequent-retracing warning; returns it.

    TensorFlow 2.21.0 `Function._omit_frequent_tracing_warning`, an
    attribute of the instance (no class attribute is changed).

    Args:
        function: a `tf.function` traced once per instance by design.
    """
    function._omit_frequent_tracing_warning = True
    return function


def unmirrored_variable(initial_value, dtype):
    """A non-trainable `tf.Variable` created eagerly that no distribution strategy mirrors.

    TensorFlow 2.21.0 `resource_variable_ops.ResourceVariable`, called
    directly: `tf.Variable` would ask the strategy in scope to create it.

    Args:
        initial_value: its value.
        dtype: its dtype (for example `"int64"`).
    """
    from tensorflow.python.ops import resource_variable_ops

    with tf.init_scope():
        return resource_variable_ops.ResourceVariable(initial_value, dtype=dtype, trainable=False)
