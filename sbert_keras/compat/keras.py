"""Reads of Keras' private attributes, each checked against Keras 3.15.1.

Why this exists: Keras has no public way to walk every sublayer of a model
(`Layer._flatten_layers`), and a layer quantized with `quantize("int8")`
keeps its int8 kernel and the helpers that undo its scale in private
attributes (`_kernel`, `_kernel_reduced_axes`, `_adjust_scale_for_dequant`,
`_embeddings`). The fused inference graph reads them to run Keras' own int8
weights, so each read is one function here: an upgrade that moves an
attribute fails here with an `AttributeError` naming it (and in the tests),
not as a fast path that silently computes something else.

Example:
```python
names = [layer.name for layer in flatten_layers(encoder, include_self=False)]
q = int8_kernel(dense)  # the int8 kernel of a Dense quantized by Keras
```
"""

CHECKED_KERAS_VERSION = "3.15.1"


def flatten_layers(layer, include_self=True, recursive=True):
    """Every layer inside `layer` (Keras 3.15.1 `Layer._flatten_layers`).

    Args:
        layer: a Keras layer or model.
        include_self: bool. Whether `layer` itself comes first.
        recursive: bool. Whether nested layers are walked too.

    Returns:
        A list of layers.
    """
    return list(layer._flatten_layers(include_self=include_self, recursive=recursive))


def int8_kernel(layer):
    """The int8 kernel of a `Dense`/`EinsumDense` quantized by Keras (Keras 3.15.1 `layer._kernel`)."""
    return layer._kernel


def kernel_reduced_axes(layer):
    """The kernel axes an int8 `EinsumDense` reduces over (Keras 3.15.1 `layer._kernel_reduced_axes`)."""
    return layer._kernel_reduced_axes


def adjust_scale_for_dequant(layer, scale):
    """An int8 `EinsumDense`'s `kernel_scale` reshaped to divide its kernel.

    Keras 3.15.1 `EinsumDense._adjust_scale_for_dequant`.

    Args:
        layer: a `keras.layers.EinsumDense` quantized to int8.
        scale: its `kernel_scale` (tensor or array).
    """
    return layer._adjust_scale_for_dequant(scale)


def int8_embeddings(layer):
    """The int8 table of an `Embedding` quantized by Keras (Keras 3.15.1 `layer._embeddings`)."""
    return layer._embeddings
