"""Every read of a private attribute of Keras, KerasHub or TensorFlow.

Each function names the library version it was checked against, so an
upgrade that moves an attribute fails here with a clear error (and in the
tests), not as a fast path that silently computes something else.
"""
