"""What sbert_keras sets up when it is the one that imports TensorFlow.

Two things must be in place before TensorFlow's first import, or they have
no effect, and neither TensorFlow nor Keras offers a later switch:

- its start-up log lines (`oneDNN custom operations are on`, `Could not
  find cuda drivers`, each twice) are written by absl while the shared
  libraries load, before any setting is read: `importing_tensorflow` holds
  them (`console.startup_lines_held`);
- its persistent XLA compilation cache (`--tf_xla_persistent_cache_directory`
  in `TF_XLA_FLAGS`) is read once, when TensorFlow loads:
  `enable_xla_cache` adds it, in `cache_dir()`, unless the user set one or
  turned the cache off. With it, a later process loads the single-query
  graph's compiled programs from disk instead of compiling them again.

`sbert_keras/__init__.py` runs TensorFlow's first import inside
`importing_tensorflow` only when one of sbert_keras' own modules imports
it (`import_hooks.import_inside`); a user's own `import tensorflow` is left
as it is, and the user's environment variables are never overwritten.
Either way, the package lists the devices once, with the lines held
(`list_devices`), before it runs anything: the first listing is what logs
`failed call to cuInit` on a machine without a GPU.

The cache lives in `$SBERT_KERAS_CACHE_DIR`, by default
`~/.cache/sbert_keras`; an empty `SBERT_KERAS_CACHE_DIR` turns it off.

Example:
```python
from sbert_keras.utils import tf_startup

with tf_startup.importing_tensorflow():
    import tensorflow  # no start-up lines; XLA's disk cache on
```
"""

import contextlib
import os
import sys

from sbert_keras.utils import console

CACHE_ENV = "SBERT_KERAS_CACHE_DIR"
XLA_CACHE_FLAG = "--tf_xla_persistent_cache_directory"


def cache_dir():
    """The cache folder (`$SBERT_KERAS_CACHE_DIR`, default `~/.cache/sbert_keras`), or None when off."""
    folder = os.environ.get(CACHE_ENV)
    if folder is None:
        folder = os.path.join(os.path.expanduser("~"), ".cache", "sbert_keras")
    return folder or None


def enable_xla_cache():
    """Adds TensorFlow's persistent XLA cache to `TF_XLA_FLAGS` unless the user set one (or the cache is off).

    TensorFlow reads the flag when it loads; set later, it has no effect,
    and nothing breaks.
    """
    folder = cache_dir()
    flags = os.environ.get("TF_XLA_FLAGS", "")
    if folder is None or XLA_CACHE_FLAG in flags:
        return
    xla = os.path.join(folder, "xla")
    try:
        os.makedirs(xla, exist_ok=True)
    except OSError:
        return
    os.environ["TF_XLA_FLAGS"] = f"{flags} {XLA_CACHE_FLAG}={xla}".strip()


def list_devices():
    """Lists TensorFlow's physical devices (if it is imported) with the start-up lines held.

    The first listing looks for CUDA and, on a machine without a GPU, logs
    `E0000 ... failed call to cuInit`. It runs no op: devices can still be
    hidden and memory growth set afterwards.
    """
    tensorflow = sys.modules.get("tensorflow")
    config = getattr(tensorflow, "config", None)
    if config is not None:
        with console.startup_lines_held():
            config.list_physical_devices()


@contextlib.contextmanager
def importing_tensorflow():
    """The context of TensorFlow's first import by sbert_keras: XLA's disk cache on, start-up lines held."""
    enable_xla_cache()
    with console.startup_lines_held():
        yield
