"""Which Keras backend runs, whether TensorFlow is there, and TensorFlow imported only when used.

sbert_keras runs on Keras' TensorFlow, JAX and PyTorch backends. The
encoder, the losses and `fit` are Keras; what needs TensorFlow itself (the
in-graph tokenisers inside `tf.data` and the SavedModel, the fast CPU
runtime, the export, Beam) runs only when the backend is TensorFlow. On the
other backends texts are tokenised on the host (`model.host_tokenizer`) and
TensorFlow is never imported, so the package installs and runs without it.

`tensorflow` and `tensorflow_text` below are modules imported on first
attribute access (Keras keeps the same kind of object private, in
`keras.src.utils.module_utils`): a module can name `tf.data` in its
TensorFlow-only functions and still import where TensorFlow is absent. A
feature that needs TensorFlow calls `require_tensorflow` first, so the user
reads one line naming the feature and the install, not a traceback.

Example:
```python
from sbert_keras.utils import backends

if backends.uses_tensorflow():
    ...  # tf.data, the fused runtime
backends.require_tensorflow("export_saved_model")
```
"""

import importlib
import importlib.util
import os
import sys
import types

BACKENDS = ("tensorflow", "jax", "torch")
INSTALL_TENSORFLOW = 'pip install "sbert_keras[tensorflow]"'


class TensorFlowRequired(ImportError):
    """A TensorFlow-only feature was used without TensorFlow, or on another Keras backend."""


def installed(module):
    """Whether `module` can be imported (found on the path; nothing is imported)."""
    if module in sys.modules:
        return sys.modules[module] is not None
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def default_backend():
    """The backend `import sbert_keras` sets when `KERAS_BACKEND` is unset: TensorFlow, else JAX, else torch."""
    for backend in BACKENDS:
        if installed(backend):
            return backend
    return "tensorflow"


def keras_backend():
    """Keras' backend: the imported Keras' if any, else what `KERAS_BACKEND` (or its default) will give."""
    keras = sys.modules.get("keras")
    if keras is not None and hasattr(keras, "backend"):
        return keras.backend.backend()
    return os.environ.get("KERAS_BACKEND", default_backend())


def uses_tensorflow():
    """Whether Keras runs on an installed TensorFlow: the in-graph tokenisers and the fast runtime apply."""
    return keras_backend() == "tensorflow" and installed("tensorflow")


def require_tensorflow(feature):
    """Raises `TensorFlowRequired` naming `feature` unless Keras runs on an installed TensorFlow.

    Args:
        feature: str. What the user called, e.g. `"export_saved_model"`.
    """
    if not installed("tensorflow"):
        raise TensorFlowRequired(f"{feature} needs TensorFlow: {INSTALL_TENSORFLOW}.")
    if keras_backend() != "tensorflow":
        raise TensorFlowRequired(
            f"{feature} needs Keras' TensorFlow backend; it is {keras_backend()!r}. "
            "Set KERAS_BACKEND=tensorflow before Keras is first imported."
        )


def tensorflow_loaded():
    """Whether TensorFlow has been imported in this process (checking a value's type never imports it)."""
    module = sys.modules.get("tensorflow")
    return module is not None and hasattr(module, "Tensor")


def is_tf_tensor(value, ragged=False):
    """Whether `value` is a `tf.Tensor` (or, with `ragged`, a `tf.RaggedTensor`), without importing TensorFlow."""
    if not tensorflow_loaded():
        return False
    tf = sys.modules["tensorflow"]
    return isinstance(value, (tf.Tensor, tf.RaggedTensor) if ragged else tf.Tensor)


class LazyModule(types.ModuleType):
    """A module imported on first attribute access; a missing one raises `TensorFlowRequired`."""

    def __init__(self, name):
        super().__init__(name)
        self._module = None

    def _load(self):
        if self._module is None:
            if not installed(self.__name__):
                raise TensorFlowRequired(f"this feature needs {self.__name__}: {INSTALL_TENSORFLOW}.")
            self._module = importlib.import_module(self.__name__)
        return self._module

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__") and self.__name__ not in sys.modules:
            raise AttributeError(name)  # a probe (`copy`, `inspect`, `__version__`) imports nothing
        return getattr(self._load(), name)

    def __repr__(self):
        return f"<lazily imported module {self.__name__!r}>"


tensorflow = LazyModule("tensorflow")
tensorflow_text = LazyModule("tensorflow_text")
