"""Every read of a private attribute of Keras, KerasHub or TensorFlow.

One module per library: `keras` (quantized layers' int8 kernels and scales,
a model's flattened layers), `keras_training` (the parts of Keras' `fit`
machinery that training reads or writes: initial epoch, distribution
strategy, loss tracker, `BackupAndRestore`'s batch count), `keras_hub` (a
`TransformerEncoder`'s sublayers, KerasHub's preset utilities) and
`tensorflow` (building ops that `tf.raw_ops` does not list, a variable no
distribution strategy mirrors). Each function names the library version it
was checked against, so an upgrade that moves an attribute fails here with
a clear error (and in the tests), not as a fast path that silently computes
something else.
"""
