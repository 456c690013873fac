"""A faster, visible cold start: cached self-check verdicts and converted models, XLA's disk cache, a status line.

The first call of an encoder in a process checks each fast path against the
float32 Keras graph (`sbert_keras.runtime.engine`) and compiles graphs (XLA for
single queries, TFLite for int8): a first call long enough to be taken
for a hang, and longer the larger the model (benchmarks/RESULTS.md, "Time
to the first vector"). Five things make that bearable:

- `status`: one line on stderr when that work starts and one when it ends
  (`encode`, the CLI, `SentenceEncoder.warmup`), so a long first call is
  not mistaken for a hang;
- `VerdictCache`: each verdict is kept on disk, keyed by a digest of the
  model's weights (`weights_digest`: a strided sample and the sum of each
  weight, far cheaper than hashing every byte of the model) and
  architecture, the library versions and the CPU, so a
  later process with the same model skips the probe runs (a fast path that
  failed keeps failing, with its warning);
- `converted_model`: a converted model file (a TFLite flatbuffer of the XNNPACK routes,
  tens of seconds and gigabytes of converter memory at base size, handed
  back to the system afterwards: `utils.memory`) is kept under the same
  key, so a later process loads it instead of converting;
- `enable_xla_cache` (`sbert_keras.utils.tf_startup`): TensorFlow's
  persistent XLA compilation cache (`--tf_xla_persistent_cache_directory`
  in `TF_XLA_FLAGS`), set when the user has not set one, before TensorFlow
  loads when sbert_keras imports it (TensorFlow reads it only then);
- `first_call`: the status line, and TensorFlow's one-off log lines of a
  first call held off the console (`console.startup_lines_held`).

The cache lives in `$SBERT_KERAS_CACHE_DIR`, by default
`~/.cache/sbert_keras`; an empty `SBERT_KERAS_CACHE_DIR` turns the caches
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
import numpy as np

from sbert_keras.utils import atomic_io
from sbert_keras.utils import console
from sbert_keras.utils import hardware
from sbert_keras.utils import memory
from sbert_keras.utils import tf_startup
from sbert_keras.utils.backends import tensorflow as tf

CACHE_ENV = tf_startup.CACHE_ENV
XLA_CACHE_FLAG = tf_startup.XLA_CACHE_FLAG
# Elements of each weight read into the verdict cache's key (`weights_digest`).
KEY_SAMPLES = 65536
# The revision of the self-checks' probes and gates (`self_check`) and of the fused graph they
# judge, part of the key: a verdict reached by another probe or on another graph, or a model
# converted from another graph (`converted_model`), is not reused.
CHECKS_REVISION = 5
# Converted model files kept on disk (`converted_model`); the least recently used go first.
CONVERTED_KEPT = 4
cache_dir = tf_startup.cache_dir
enable_xla_cache = tf_startup.enable_xla_cache


def _version(package):
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def weights_digest(variable):
    """A SHA-256 of `variable`'s sum over every element and of up to `KEY_SAMPLES` elements' bits, strided.

    A key, not a check: a trained or loaded model differs in every sampled
    element. Hashing every byte of a large model would add to each cold
    start; a sample and a sum cost a fraction of that.
    """
    flat = np.ascontiguousarray(np.asarray(variable.numpy())).reshape(-1)
    sample = flat[:: max(1, flat.size // KEY_SAMPLES)]
    total = float(flat.sum(dtype="float64")) if flat.dtype.kind in "fiu" else 0.0
    return hashlib.sha256(sample.tobytes() + repr(total).encode()).hexdigest()


def model_key(encoder, host=None):
    """A SHA-256 of `encoder`'s weights, architecture, the library versions and the host.

    Args:
        encoder: a `SentenceEncoder`.
        host: a `hardware.Host`, or None for this machine's.
    """
    host = host or hardware.current_host()
    weights = encoder.weights
    facts = {
        "weights": [[list(v.shape), str(v.dtype)] for v in weights],  # not paths: names vary (`encoder_2`)
        "digests": [weights_digest(v) for v in weights],
        "backbone": type(encoder.backbone).__name__,
        "backbone_config": {k: v for k, v in encoder.backbone.get_config().items() if k != "name"},
        "pooling": encoder.pooling,
        "versions": [tf.__version__, keras.__version__, keras_hub.__version__, _version("sbert_keras")],
        "checks": CHECKS_REVISION,
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
        return self.get_all([name], precision)[0]

    def get_all(self, names, precision):
        """The stored verdicts of `names` in `precision` (True, False or None each), from one read of the file."""
        stored = {} if self.path() is None else self._read()
        verdicts = [stored.get(f"{name}/{precision}") for name in names]
        return [verdict if isinstance(verdict, bool) else None for verdict in verdicts]

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

    def written_at(self):
        """When the stored verdicts were last written (seconds since the epoch), or None."""
        path = self.path()
        try:
            return None if path is None else os.path.getmtime(path)
        except OSError:
            return None

    def put(self, name, precision, verdict):
        """Stores a verdict (written to a temporary file, then renamed)."""
        path = self.path()
        if path is None:
            return
        verdicts = self._read()
        verdicts[f"{name}/{precision}"] = bool(verdict)
        with contextlib.suppress(OSError):  # a full or read-only disk: the cache only saves time
            os.makedirs(os.path.dirname(path), exist_ok=True)
            atomic_io.write_json(path, verdicts)


def converted_model(encoder, kind, convert, host=None):
    """The bytes `convert()` makes of `encoder`'s current weights, kept on disk across processes.

    The file is `converted/<model_key>-<kind>-<SHA-256 of its bytes>`: a
    later process with the same weights, library versions, graph revision
    (`CHECKS_REVISION`) and CPU reads it back, and a file whose bytes do not
    match its name (cut short, edited) is removed and converted again. It is
    written atomically (`atomic_io.replace_atomically`); only the `CONVERTED_KEPT`
    most recently used files stay. With the cache off or unwritable,
    `convert()` runs each time.

    Args:
        encoder: a `SentenceEncoder`.
        kind: str. What `convert` makes (e.g. `"xnnpack-int8"`); part of the name.
        convert: callable returning bytes.
        host: a `hardware.Host`, or None for this machine's.

    Example:
    ```python
    model = converted_model(encoder, "xnnpack-int8", lambda: xnnpack.convert(forward))
    ```
    """
    folder = cache_dir()
    if folder is None:
        return _converted(convert)
    folder = os.path.join(folder, "converted")
    prefix = _converted_prefix(encoder, kind, host)
    with contextlib.suppress(OSError):
        for name in sorted(os.listdir(folder)):
            if not name.startswith(prefix):  # other models, and writes in flight (`.<name>.tmp-...`)
                continue
            path = os.path.join(folder, name)
            data = _read_bytes(path)
            if data is not None and hashlib.sha256(data).hexdigest() == name[len(prefix) :]:
                with contextlib.suppress(OSError):
                    os.utime(path)  # recently used: pruned last
                return data
            with contextlib.suppress(OSError):
                os.remove(path)
    data = _converted(convert)
    _store(folder, prefix + hashlib.sha256(data).hexdigest(), data)
    return data


def converted_on_disk(encoder, kind, host=None):
    """Whether `converted_model` would read `kind` of `encoder`'s current weights from disk (a file by that name).

    Its bytes are checked when read; this only looks for the name.
    """
    folder = cache_dir()
    if folder is None:
        return False
    prefix = _converted_prefix(encoder, kind, host)
    with contextlib.suppress(OSError):
        return any(name.startswith(prefix) for name in os.listdir(os.path.join(folder, "converted")))
    return False


def _converted_prefix(encoder, kind, host):
    """The start of the names of `converted_model`'s files of `kind` for `encoder`'s current weights."""
    return f"{model_key(encoder, host)}-{kind}-"


def _converted(convert):
    """`convert()`, then the converter's freed memory handed back (`memory.release_freed`: gigabytes at base size)."""
    data = convert()
    memory.release_freed()
    return data


def _read_bytes(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def _store(folder, name, data):
    """Writes `data` to `folder/name` (`atomic_io.replace_atomically`) and prunes to `CONVERTED_KEPT` files."""

    def write(temporary):
        with open(temporary, "wb") as f:
            f.write(data)

    with contextlib.suppress(OSError):  # a full or read-only disk: the cache only saves time
        os.makedirs(folder, exist_ok=True)
        atomic_io.replace_atomically(write, os.path.join(folder, name))
        kept = [os.path.join(folder, n) for n in os.listdir(folder) if not n.startswith(".")]  # not in flight
        for old in sorted(kept, key=os.path.getmtime, reverse=True)[CONVERTED_KEPT:]:
            os.remove(old)


def status(encoder, precision, enabled=True, stream=None):
    """Writes what a first call prepares, then how long it took (one line each, on stderr; `console.status`).

    Args:
        encoder: the `SentenceEncoder` being prepared.
        precision: str. The requested precision.
        enabled: bool. Write nothing when False.
        stream: a text stream (default `sys.stderr`).
    """
    folder = cache_dir()
    kept = f"kept in {folder} for later processes" if folder else "once per process"
    doing = (
        f"sbert_keras: preparing {encoder.name!r} for {precision} inference (self-checks and graph "
        f"compilation, {kept}; `encoder.warmup()` does it ahead)..."
    )
    return console.status(doing, f"sbert_keras: {encoder.name!r} ready", enabled, stream)


@contextlib.contextmanager
def first_call(encoder, precision, first, verbose):
    """The context of a first call (of a precision, or of a request size): TensorFlow's one-off lines held.

    The first graphs an encoder runs make TensorFlow log, once per process,
    lines that are not the user's concern (`oneDNN supports DT_INT64 only on
    platforms with AVX-512`, XLA's `Compiled cluster using XLA!`): they are
    held and dropped (`console.startup_lines_held`); anything else is written
    back. The status line (`status`) is written on the first call of a
    precision only.

    Args:
        encoder: the `SentenceEncoder` being prepared.
        precision: str. The requested precision.
        first: bool. Whether this is a first call (else nothing is done).
        verbose: bool. Write the status line (the engine asks for it on a precision's first call).
    """
    if not first:
        yield
        return
    with status(encoder, precision, verbose), console.startup_lines_held(keep_warnings=True):
        yield
