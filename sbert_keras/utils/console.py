"""A clean console for the entry points (the CLI, the demo, the notebooks).

TensorFlow 2.21 writes C++ log lines while its shared libraries load
(`oneDNN custom operations are on`, `Could not find cuda drivers`, each
twice, after `WARNING: All log messages before absl::InitializeLog() ...`)
one more when it first looks for devices (`E0000 ... failed call to
cuInit` on a machine without a GPU), and one when the first graph runs an
op that oneDNN does not take in some dtype (`E0000 ... oneDNN supports
DT_INT64 only on platforms with AVX-512. Falling back to ... Eigen`, logged
once per process, on AVX-512 CPUs too). A new user reads them as failures.

No environment variable silences the load-time lines: they are logged by
absl before TensorFlow reads `TF_CPP_MIN_LOG_LEVEL`. Measured on TF 2.21:
`TF_CPP_MIN_LOG_LEVEL=2` (set before the import) hides `cpu_feature_guard`;
`=3` also hides the cuInit error (and every later C++ error, so it is not
used); `ABSL_MIN_LOG_LEVEL`, `GLOG_minloglevel` and `CUDA_VISIBLE_DEVICES`
hide none of the load-time lines. Neither TensorFlow, Keras nor absl offers
a switch for them, hence this module: `quiet_tensorflow` sets
`TF_CPP_MIN_LOG_LEVEL=2` unless the user set it, and sends file descriptor 2
to a temporary file only while TensorFlow is imported and lists its devices.
It also runs one tiny graph there, so that the once-per-process oneDNN
notice comes while captured. It then writes back every captured line except
TensorFlow's known start-up notices (`is_startup_notice`); if the import
fails, everything captured is written back before the error propagates.
Later lines, errors included, are never touched.

Library code never calls `quiet_tensorflow` (it sets an environment
variable and initialises TensorFlow's runtime). It uses `startup_lines_held`
instead, a context manager that changes nothing global for longer than its
block: while sbert_keras itself imports TensorFlow (never when the user
did), while it lists the devices (`utils.hardware`, the cuInit line) and
during an encoder's first call (the oneDNN notice, XLA's INFO lines), what
TensorFlow's C++ code writes to file descriptor 2 is held in a temporary
file and written back afterwards without the start-up notices. Python's
`sys.stderr` (warnings, progress bars, the status line) keeps writing to the
console as it happens; everything else held, errors included, is written
back, and all of it if the block raises. The user's `TF_CPP_MIN_LOG_LEVEL`
and logging settings are never touched.

`status` is the one status line of the package: a line on stderr when a
slow step starts (TensorFlow's import, a model's load, a first call's
self-checks) and one with its duration when it ends, so that seconds of
silence are not mistaken for a hang. stdout stays for results.
"""

import contextlib
import logging
import os
import re
import sys
import tempfile
import threading
import time

# absl's C++ log prefix: severity letter, MMDD, time, thread id, file:line].
_TF_LOG_LINE = re.compile(r"^[IWEF]\d{4} [\d:.]+\s+\d+ \S+:\d+\] ")
# ERROR-level start-up lines that only say "no GPU here".
_BENIGN_ERRORS = (
    "cuInit",
    "Unable to register cuDNN",
    "Unable to register cuFFT",
    "Unable to register cuBLAS",
    "only on platforms with AVX-512",
    # Reading XLA's disk cache (`utils.tf_startup`): a text-format attempt before the binary one,
    # and tuning attributes (`+prefer-no-scatter`) that are not CPU features.
    "Error parsing text-format tensorflow.XlaSerializedCacheEntry",
    "Loading XLA:CPU AOT result. Target machine feature",
)
_NOTICES = (
    "WARNING: All log messages before absl::InitializeLog() is called",
    "To enable the following instructions:",
)


def is_startup_notice(line):
    """Whether `line` is one of TensorFlow's harmless start-up log lines.

    INFO and WARNING lines in absl's C++ format, ERROR lines about a missing
    CUDA driver, and the two absl/cpu-feature notices. Any other line (a
    Python warning, a real C++ error) is not.

    Args:
        line: str. One line of stderr output.

    Example:
    ```python
    assert is_startup_notice("I0000 00:00:1795425248.194190    4760 "
                             "port.cc:153] oneDNN custom operations are on.")
    assert not is_startup_notice("ValueError: bad input")
    ```
    """
    if line.startswith(_NOTICES):
        return True
    if not _TF_LOG_LINE.match(line):
        return False
    return line[0] in "IW" or any(text in line for text in _BENIGN_ERRORS)


# Descriptor 2 is redirected by one block at a time (re-entrant within a thread).
_HOLDING = threading.RLock()


def _filtered(text, keep_warnings=False):
    def dropped(line):
        return is_startup_notice(line) and not (keep_warnings and line.startswith("W"))

    return "".join(line for line in text.splitlines(True) if not dropped(line))


def _python_stderr_fd():
    try:
        return sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):  # pytest's capture, a StringIO: not file descriptor 2
        return None


@contextlib.contextmanager
def startup_lines_held(keep_warnings=False):
    """Holds what is written to file descriptor 2 during the block; writes it back without start-up notices.

    `sys.stderr`, when it writes to descriptor 2, is pointed at the console
    for the block, so Python's own output (warnings, progress bars) is not
    delayed: only C++ code's lines are held. If the block raises, every
    held line is written back. Does nothing where stderr has no descriptor,
    or while another thread holds it (descriptor 2 is one per process);
    nested blocks in one thread are fine.

    Args:
        keep_warnings: bool. Write back absl's WARNING lines too (only INFO
            lines and the known start-up errors are dropped).

    Example:
    ```python
    with startup_lines_held():
        tf.config.list_physical_devices()  # no `E0000 ... failed call to cuInit` on a CPU-only machine
    ```
    """
    if not _HOLDING.acquire(blocking=False):  # another thread holds descriptor 2: leave it to that one
        yield
        return
    try:
        with _held(keep_warnings):
            yield
    finally:
        _HOLDING.release()


@contextlib.contextmanager
def _held(keep_warnings):
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (AttributeError, OSError, ValueError):
        yield
        return
    python_stderr = sys.stderr
    with tempfile.TemporaryFile() as capture:
        os.dup2(capture.fileno(), 2)
        opened = None
        if _python_stderr_fd() == 2:
            opened = open(os.dup(saved), "w", buffering=1, encoding=python_stderr.encoding, errors="replace")
            sys.stderr = opened
        failed = True
        try:
            yield
            failed = False
        finally:
            sys.stderr.flush()
            sys.stderr = python_stderr
            if opened is not None:
                _close_unless_logged_to(opened)
            os.dup2(saved, 2)
            os.close(saved)
            capture.seek(0)
            text = capture.read().decode("utf-8", errors="replace")
            if text:
                sys.stderr.write(text if failed else _filtered(text, keep_warnings))
                sys.stderr.flush()


def _close_unless_logged_to(stream):
    """Closes the block's `sys.stderr` unless a logging handler made during the block writes to it.

    A handler made then (absl's, when TensorFlow is first imported in the
    block) took that stream as its console: it stays open for the handler.
    Any other is closed here, not left to the garbage collector (a
    `ResourceWarning`).
    """
    loggers = [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]
    handlers = [h for logger in loggers for h in getattr(logger, "handlers", ())]
    handlers += [h.python_handler for h in handlers if hasattr(h, "python_handler")]  # absl's ABSLHandler
    if all(getattr(handler, "stream", None) is not stream for handler in handlers):
        stream.close()


def quiet_tensorflow():
    """Imports TensorFlow without its start-up log lines; call before any import of it.

    Sets `TF_CPP_MIN_LOG_LEVEL=2` unless already set (the user's value
    wins). Does nothing more if TensorFlow is already imported or stderr has
    no file descriptor. It runs one op, so TensorFlow's runtime is
    initialised afterwards (`tf.config.set_visible_devices` and memory
    growth can no longer be changed): for entry points, not libraries.

    Example:
    ```python
    from sbert_keras.utils import console
    console.quiet_tensorflow()  # first thing in an entry point
    ```
    """
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if "tensorflow" in sys.modules:
        return
    with startup_lines_held():
        # Imported here, not at the top: the environment and the
        # redirection must be in place first.
        import tensorflow as tf

        tf.config.list_physical_devices()  # the cuInit line comes here
        # The first graph holding an op that oneDNN does not take in some
        # dtype logs, once per process, "E... oneDNN supports DT_BOOL only
        # on platforms with AVX-512. Falling back to ... Eigen" (even on
        # AVX-512 CPUs). Let it come now, while held.
        tf.function(tf.transpose)(tf.zeros([2, 3], tf.bool))


@contextlib.contextmanager
def status(doing, done, enabled=True, stream=None):
    """Writes `doing` now and `f"{done} in {seconds:.1f} s"` when the block ends without an error (stderr).

    After an error nothing more is written: the error's own message follows.

    Args:
        doing: str. What starts, e.g. `"sbert-keras: loading model m.keras ..."`.
        done: str. What ended, e.g. `"sbert-keras: model loaded"`.
        enabled: bool. Write nothing when False.
        stream: a text stream (default: `sys.stderr` at the time of the call).

    Example:
    ```python
    with status("sbert-keras: loading model m.keras ...", "sbert-keras: model loaded"):
        encoder = SentenceEncoder.from_preset("m.keras")
    # sbert-keras: loading model m.keras ...
    # sbert-keras: model loaded in 0.9 s
    ```
    """
    if not enabled:
        yield
        return
    stream = stream or sys.stderr
    stream.write(doing + "\n")
    stream.flush()
    start = time.perf_counter()
    yield
    stream.write(f"{done} in {time.perf_counter() - start:.1f} s\n")
    stream.flush()
