"""A faster, visible cold start: cached self-check verdicts, XLA's disk cache, a status line.

The first call of an encoder in a process checks each fast path against the
float32 Keras graph (`sbert_keras.runtime.engine`) and compiles graphs (XLA for
single queries, TFLite for int8): seconds on all-MiniLM-L6-v2, tens of
seconds on a base-size model. Three things make that bearable:

- `status`: one line on stderr when that work starts and one when it ends
  (`encode`, the CLI, `SentenceEncoder.warmup`), so a long first call is
  not mistaken for a hang;
- `VerdictCache`: each verdict is kept on disk, keyed by a digest of the
  model's weights and architecture, the library versions and the CPU, so a
  later process with the same model skips the probe runs (a fast path that
  failed keeps failing, with its warning);
- `enable_xla_cache`: TensorFlow's persistent XLA compilation cache
  (`--tf_xla_persistent_cache_directory` in `TF_XLA_FLAGS`), set when the
  user has not set one and before this process compiles anything.

The cache lives in `$SBERT_KERAS_CACHE_DIR`, by default
`~/.cache/sbert_keras`; an empty `SBERT_KERAS_CACHE_DIR` turns both caches
off. A cache that cannot be read or written is ignored: it only saves time.
Nothing like it exists in Keras or KerasHub, hence this module.
"""

import contextlib
import hashlib
import importlib.metadata
import json
import os
import warnings

import keras
import keras_hub
import tensorflow as tf

from sbert_keras.runtime import weight_writes
from sbert_keras.utils import console
from sbert_keras.utils import hardware

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

    TensorFlow reads the flag at the process's first XLA compilation; later
    settings have no effect, and nothing breaks.
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


def _version(package):
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def model_key(encoder, host=None):
    """A SHA-256 of `encoder`'s weights, architecture, the library versions and the host.

    Args:
        encoder: a `SentenceEncoder`.
        host: a `hardware.Host`, or None for this machine's.
    """
    host = host or hardware.current_host()
    weights = encoder.weights
    digests = tf.function(lambda: tf.stack([weight_writes.digest(v) for v in weights]))().numpy()
    facts = {
        "weights": [[list(v.shape), str(v.dtype)] for v in weights],  # not paths: names vary (`encoder_2`)
        "digests": digests.tolist(),
        "backbone": type(encoder.backbone).__name__,
        "backbone_config": {k: v for k, v in encoder.backbone.get_config().items() if k != "name"},
        "pooling": encoder.pooling,
        "versions": [tf.__version__, keras.__version__, keras_hub.__version__, _version("sbert_keras")],
        "cpu": sorted(host.cpu_flags),
        "gpu": host.gpu,
    }
    return hashlib.sha256(json.dumps(facts, sort_keys=True, default=str).encode()).hexdigest()


class VerdictCache:
    """Self-check verdicts of one encoder, kept on disk across processes.

    Args:
        encoder: a `SentenceEncoder`. Its key (`model_key`) is computed on
            first use, so an encoder whose paths are never checked pays nothing.
        host: a `hardware.Host` the verdicts hold for, or None for this machine's.

    Example:
    ```python
    cache = VerdictCache(encoder)
    cache.get("fused", "bfloat16")  # None the first time
    cache.put("fused", "bfloat16", True)
    ```
    """

    def __init__(self, encoder, host=None):
        self.encoder = encoder
        self.host = host
        self._path = None

    def path(self):
        """The JSON file of this encoder's verdicts, or None when the cache is off."""
        folder = cache_dir()
        if folder is None:
            return None
        if self._path is None:
            self._path = os.path.join(folder, "verdicts", model_key(self.encoder, self.host) + ".json")
        return self._path

    def _read(self):
        path = self.path()
        try:
            with open(path, encoding="utf-8") as f:
                verdicts = json.load(f)
            return verdicts if isinstance(verdicts, dict) else {}
        except (OSError, ValueError, TypeError):
            return {}

    def get(self, name, precision):
        """The stored verdict of path `name` in `precision` (True or False), or None."""
        if self.path() is None:
            return None
        verdict = self._read().get(f"{name}/{precision}")
        return verdict if isinstance(verdict, bool) else None

    def verdict(self, name, precision, check):
        """The verdict of path `name` in `precision`: stored, or `check()` (then stored).

        A stored failure warns again, as the check did.

        Args:
            name: str. The checked path (e.g. `"fused"`).
            precision: str.
            check: callable returning whether the path passes its self-check.
        """
        verdict = self.get(name, precision)
        if verdict is None:
            verdict = bool(check())
            self.put(name, precision, verdict)
        elif not verdict:
            warnings.warn(
                f"The {name} path of {self.encoder.name!r} in {precision} failed its self-check on this "
                f"machine before (recorded in {self.path()}); it is not used.",
                stacklevel=4,
            )
        return verdict

    def put(self, name, precision, verdict):
        """Stores a verdict (written to a temporary file, then renamed)."""
        path = self.path()
        if path is None:
            return
        verdicts = self._read()
        verdicts[f"{name}/{precision}"] = bool(verdict)
        temporary = f"{path}.{os.getpid()}.tmp"
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(temporary, "w", encoding="utf-8") as f:
                json.dump(verdicts, f, sort_keys=True)
            os.replace(temporary, path)
        except OSError:
            with contextlib.suppress(OSError):
                os.remove(temporary)


def status(encoder, precision, enabled=True, stream=None):
    """Writes what a first call prepares, then how long it took (one line each, on stderr; `console.status`).

    Args:
        encoder: the `SentenceEncoder` being prepared.
        precision: str. The requested precision.
        enabled: bool. Write nothing when False.
        stream: a text stream (default `sys.stderr`).
    """
    doing = (
        f"sbert_keras: preparing {encoder.name!r} for {precision} inference "
        "(self-checks and graph compilation, once per process; `encoder.warmup()` does it ahead)..."
    )
    return console.status(doing, f"sbert_keras: {encoder.name!r} ready", enabled, stream)
