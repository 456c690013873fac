"""One shared test harness for serialization, saving and precision.

KerasHub's `keras_hub/src/tests/test_case.py` has the same three checks
(`run_serialization_test`, `run_model_saving_test`, `run_precision_test`)
as methods of a `tf.test.TestCase`. Ours are plain functions for pytest, and
the precision check asks for what this package promises instead of what
KerasHub's does: under a mixed policy the model computes in low precision,
while outputs, losses and gradients are float32 and finite.

Example:
```python
from harness import run_model_saving_test, run_precision_test, run_serialization_test

run_serialization_test(TripletLoss(margin=0.3))
restored = run_model_saving_test(model, (a, b), tmp_path, method="predict")
run_precision_test(lambda: MaskedPooling("mean"), (x, mask))
```
"""

import contextlib
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import threading

import keras
import numpy as np
import tensorflow as tf
from keras import tree

from conftest import ROOT
from sbert_keras.utils import atomic_io

# A `$SBERT_KERAS_TEST_PAUSE_AT` that matches no stage: every stage is logged, none pauses.
LOG_STAGES = "log stages only"

MIXED_POLICIES = ("mixed_float16", "mixed_bfloat16")


def _json(config):
    return json.dumps(config, sort_keys=True, indent=1, default=str)


def _public_attributes(instance):
    return {name for name in dir(instance) if name != "__annotations__"}


def _deserialize(serialized):
    """Deserializes after a JSON round trip, as a `.keras` file would."""
    return keras.saving.deserialize_keras_object(json.loads(_json(serialized)))


def run_serialization_test(instance, check_attributes=True):
    """`get_config` round trips, directly and through `serialize_keras_object`.

    Args:
        instance: a registered layer, model or loss.
        check_attributes: bool. The revived object has the same attributes
            (`dir()`) as the original.

    Returns:
        The object revived from its serialized form.
    """
    cls = type(instance)
    config = instance.get_config()
    expected = _json(config)
    # `get_config` must return a fresh, JSON-serializable dict each time.
    json.dumps(config)
    revived = cls.from_config(instance.get_config())
    assert type(revived) is cls
    assert _json(revived.get_config()) == expected, f"{cls.__name__}.from_config(get_config()) changes the config"
    if check_attributes:
        missing = _public_attributes(instance) ^ _public_attributes(revived)
        assert not missing, f"{cls.__name__}: attributes differ after from_config: {sorted(missing)}"
    revived = _deserialize(keras.saving.serialize_keras_object(instance))
    assert type(revived) is cls, f"deserialized to {type(revived).__name__}, expected {cls.__name__}"
    assert _json(revived.get_config()) == expected, f"{cls.__name__}: serialize/deserialize changes the config"
    return revived


def _outputs(model, input_data, method):
    if method == "predict":
        return model.predict(input_data, verbose=0)
    return model(input_data)


def _to_numpy(structure):
    return tree.map_structure(lambda t: np.asarray(keras.ops.convert_to_numpy(t)), structure)


def assert_all_close(actual, expected, atol=1e-6, rtol=1e-6):
    """Two (nested) structures of tensors agree within tolerances."""
    tree.assert_same_structure(actual, expected)
    for a, e in zip(tree.flatten(_to_numpy(actual)), tree.flatten(_to_numpy(expected)), strict=True):
        np.testing.assert_allclose(a, e, atol=atol, rtol=rtol)


def run_model_saving_test(model, input_data, directory, atol=1e-6, rtol=1e-6, method="call"):
    """Saves `model` to `.keras`, reloads it and compares the outputs.

    Args:
        model: a Keras model (built).
        input_data: inputs for `model(...)` or `model.predict(...)`.
        directory: str or path. Where the `.keras` file is written.
        atol: float. Absolute tolerance of the output comparison.
        rtol: float. Relative tolerance of the output comparison.
        method: str. `"call"` (`model(input_data)`) or `"predict"` (runs the
            attached preprocessor, e.g. on raw strings).

    Returns:
        The restored model, of the same class, for further checks.
    """
    expected = _outputs(model, input_data, method)
    path = os.path.join(directory, f"{model.name}.keras")
    model.save(path)
    restored = keras.saving.load_model(path)
    assert type(restored) is type(model), f"loaded {type(restored).__name__}, saved {type(model).__name__}"
    assert_all_close(_outputs(restored, input_data, method), expected, atol=atol, rtol=rtol)
    return restored


@contextlib.contextmanager
def dtype_policy(name):
    """Sets the global Keras dtype policy inside the block, restores it after."""
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(name)
    try:
        yield keras.config.dtype_policy()
    finally:
        keras.config.set_dtype_policy(previous)


def assert_float32_and_finite(tensor, what, dtype="float32"):
    """`tensor` has `dtype` and only finite values; `what` names it in the failure."""
    actual = keras.backend.standardize_dtype(tensor.dtype)
    assert actual == dtype, f"{what} is {actual}, expected {dtype}"
    values = np.asarray(keras.ops.convert_to_numpy(keras.ops.cast(tensor, "float32")))
    assert np.all(np.isfinite(values)), f"{what} has non-finite values"


def _call(instance, input_data):
    """A model takes its inputs whole; a layer takes a tuple as arguments, a dict as keywords."""
    if isinstance(instance, keras.Model):
        return instance(input_data)
    if isinstance(input_data, tuple):
        return instance(*input_data)
    if isinstance(input_data, dict):
        return instance(**input_data)
    return instance(input_data)


def _assert_policy_applies(instance, policy, name):
    """A model under a mixed policy must compute somewhere in low precision.

    (`_flatten_layers` is private Keras API; KerasHub's harness uses it too.)
    """
    if not isinstance(instance, keras.Model):
        return
    computes = {layer.compute_dtype for layer in instance._flatten_layers()}
    assert policy.compute_dtype in computes, (
        f"no layer of {type(instance).__name__} computes in {policy.compute_dtype} under {name}: {computes}"
    )


def run_precision_test(
    build, input_data, y=None, loss=None, policies=MIXED_POLICIES, check_gradients=None, output_dtype="float32"
):
    """Under each mixed policy, outputs (and loss, gradients) are float32 and finite.

    Args:
        build: callable `() -> layer or model`, called inside each policy.
        input_data: the call's inputs (a tuple is passed as positional
            arguments, a dict as keyword arguments to a layer), or a callable
            `instance -> inputs` (e.g. to run the model's preprocessor).
        y: targets for `loss`, or None.
        loss: a loss object, `"default"` (`instance.default_loss()`), or
            None (outputs only).
        policies: tuple of str. The global policies to try.
        check_gradients: bool or None. Every trainable weight gets a finite
            gradient of the loss; `None` checks when there is a loss and
            trainable weights.
        output_dtype: str or None. The dtype of every float output; `None`
            is the policy's compute dtype (a backbone's token embeddings).

    Returns:
        A dict `policy -> float loss` (None without a loss).
    """
    losses = {}
    for name in policies:
        with dtype_policy(name) as policy:
            instance = build()
            inputs = input_data(instance) if callable(input_data) else input_data
            _assert_policy_applies(instance, policy, name)
            loss_fn = instance.default_loss() if loss == "default" else loss
            with tf.GradientTape() as tape:
                result = _call(instance, inputs)
                value = None if loss_fn is None else loss_fn(y, result)
            for i, tensor in enumerate(tree.flatten(result)):
                what = f"{name}: output {i} of {type(instance).__name__}"
                assert_float32_and_finite(tensor, what, output_dtype or policy.compute_dtype)
            if value is None:
                losses[name] = None
                continue
            assert_float32_and_finite(value, f"{name}: loss of {type(instance).__name__}")
            losses[name] = float(value)
            weights = instance.trainable_variables
            if check_gradients is False or not weights:
                continue
            grads = tape.gradient(value, weights)
            for weight, grad in zip(weights, grads, strict=True):
                assert grad is not None, f"{name}: {weight.path} gets no gradient"
                grad = keras.ops.cast(grad, "float32")
                assert np.all(np.isfinite(keras.ops.convert_to_numpy(grad))), f"{name}: {weight.path} gradient"
    return losses


def run_on_small_disk(mountpoint, size, argv, env=None, timeout=600):
    """Runs `argv` with a `size` tmpfs mounted at `mountpoint` (disk-full tests).

    The mount lives in a private mount namespace (`unshare -m`), so it is
    gone when the command ends and nothing else sees it. Needs root and
    `unshare`; the caller skips otherwise (`small_disk_available`).

    Args:
        mountpoint: path. An existing, empty folder.
        size: str. The tmpfs size, e.g. `"2M"`.
        argv: list of str. The command to run on the small disk.
        env: dict or None. The command's environment.
        timeout: seconds.

    Returns:
        `subprocess.CompletedProcess` with text `stdout` and `stderr`.

    Example:
    ```python
    if not small_disk_available():
        pytest.skip("needs root and unshare for a private tmpfs")
    done = run_on_small_disk(tmp_path / "disk", "1M", [sys.executable, "-c", code])
    ```
    """
    script = 'mount -t tmpfs -o size="$1" tmpfs "$2" && shift 2 && exec "$@"'
    return subprocess.run(
        ["unshare", "-m", "sh", "-c", script, "sh", size, str(mountpoint), *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )


def small_disk_available():
    """Whether `run_on_small_disk` can mount a private tmpfs here (root with `unshare`)."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True)
    return probe.returncode == 0


# Runs `sbert-keras` in the child; `fill` fills the disk first and turns the free-space
# checks off, so that the writes themselves meet the full disk. The last stdout line lists
# what the command left on the disk (the filler not counted).
_CLI_ON_DISK = """
import json, os, sys
from sbert_keras.utils import disk_space
from sbert_keras.cli.parser import main
disk, fill, args = sys.argv[1], sys.argv[2] == "fill", sys.argv[3:]
if fill:
    disk_space.check_free_space = lambda path, needed: None
    with open(os.path.join(disk, "filler"), "wb", buffering=0) as f:
        try:
            while True:
                f.write(bytes(65536))
        except OSError:
            pass
code = main(args)
print(json.dumps(sorted(set(os.listdir(disk)) - {"filler"})))
sys.exit(code)
"""


def run_cli_on_small_disk(disk, size, args, fill=False, env=None, timeout=600):
    """Runs `sbert-keras args` with a `size` tmpfs mounted at `disk` (`run_on_small_disk`).

    Args:
        disk: path. An existing, empty folder: the mount point.
        size: str. The tmpfs size, e.g. `"512k"`.
        args: list. The command line after `sbert-keras`.
        fill: bool. Fill the disk first and skip the free-space checks, so
            that the command's writes meet the full disk.
        env: dict or None. The command's environment.
        timeout: seconds.

    Returns:
        `(completed process, entries the command left on the disk)`.
    """
    argv = [sys.executable, "-c", _CLI_ON_DISK, str(disk), "fill" if fill else "-", *map(str, args)]
    done = run_on_small_disk(disk, size, argv, env=env, timeout=timeout)
    lines = done.stdout.strip().splitlines()
    return done, json.loads(lines[-1]) if lines else None


def error_lines(stderr):
    """The lines of a CLI's `stderr` that are not status lines.

    Status lines (`sbert-keras: starting TensorFlow ...`, `sbert-keras: loading model ...`, their
    `... in 1.2 s`, `sbert_keras: preparing ...`) start with the program's name and a colon; an error
    line names its command: `sbert-keras <command>: error: ...`.
    """
    return [line for line in stderr.splitlines() if not line.startswith(("sbert-keras: ", "sbert_keras: "))]


def cli_env(pause_at=None, **extra):
    """The environment of a CLI subprocess: this checkout first, quiet TensorFlow, `extra` variables.

    Args:
        pause_at: str or None. `atomic_io.PAUSE_ENV`: a stage to pause at
            (`LOG_STAGES` logs every stage and pauses at none).
        **extra: more variables (e.g. `PYTHONHASHSEED="1"`).
    """
    env = dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="3", **extra)
    env.pop(atomic_io.PAUSE_ENV, None)
    if pause_at:
        env[atomic_io.PAUSE_ENV] = pause_at
    return env


def _default_interrupt():
    """In the child: SIGINT as a terminal delivers it, even when the test run itself ignores it.

    A shell starts a background job (`make test &`) with SIGINT ignored, and a
    Python started that way never raises `KeyboardInterrupt`.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start_until_paused(args, pause_at, timeout=600, **extra_env):
    """Starts the CLI in a subprocess and returns it, alive, once it pauses at the stage `pause_at`.

    Args:
        args: the CLI arguments.
        pause_at: str. A stage name, or part of one (see `atomic_io.pause_for_tests`).
        timeout: seconds to wait for the pause.
        **extra_env: more environment variables.

    Returns:
        `(process, stages)`: the paused `Popen` (the caller kills it) and the stage lines logged.
    """
    proc = subprocess.Popen(
        [sys.executable, "-m", "sbert_keras.cli", *map(str, args)],
        env=cli_env(pause_at, **extra_env),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_default_interrupt,
    )
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    stages = []
    try:
        for line in proc.stderr:
            if line.startswith("sbert-keras test: "):
                stages.append(line.strip())
                if "paused at" in line:
                    break
    finally:
        timer.cancel()
    if not (stages and "paused at" in stages[-1]):
        proc.kill()
        proc.wait()
        raise AssertionError(f"never reached {pause_at!r}: {stages}")
    return proc, stages


def run_until_paused(args, pause_at, timeout=600, **extra_env):
    """Runs the CLI in a subprocess and SIGKILLs it inside the save named `pause_at`; returns the stages."""
    proc, stages = start_until_paused(args, pause_at, timeout, **extra_env)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stderr.close()
    return stages


def interrupt_when_paused(args, pause_at, timeout=600, **extra_env):
    """Runs the CLI in a subprocess and sends it SIGINT (Ctrl-C) inside the stage `pause_at`.

    Returns:
        `(exit status, the rest of its stderr)`.
    """
    proc, _ = start_until_paused(args, pause_at, timeout, **extra_env)
    proc.send_signal(signal.SIGINT)
    rest = proc.stderr.read()
    proc.stderr.close()
    return proc.wait(timeout=timeout), rest


def run_cli_logging_stages(args, timeout=600, **extra_env):
    """Runs the CLI in a subprocess to the end, logging its save stages.

    Returns:
        `(completed_process, stages)`: text output, and the stage lines of its stderr.
    """
    done = subprocess.run(
        [sys.executable, "-m", "sbert_keras.cli", *map(str, args)],
        env=cli_env(LOG_STAGES, **extra_env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return done, [line for line in done.stderr.splitlines() if line.startswith("sbert-keras test: ")]


def start_on_backend(script, backend, folder, *args):
    """Starts `script out folder *args` under Keras' `backend` in a fresh process; returns `(out, process)`.

    Keras' backend is chosen once per process, so each backend of a
    cross-backend comparison runs the same script in its own process, which
    writes its results to `out` (`folder/<backend>.npz`).
    """
    root = pathlib.Path(__file__).resolve().parents[1]
    env = {**os.environ, "KERAS_BACKEND": backend, "PYTHONPATH": str(root), "TF_CPP_MIN_LOG_LEVEL": "2"}
    out = folder / f"{backend}.npz"
    command = [sys.executable, str(script), str(out), str(folder), *args]
    return out, subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def finish_on_backend(backend, out, process, timeout=900):
    """Waits for a `start_on_backend` process; its arrays as a dict (its output in the failure message)."""
    output, _ = process.communicate(timeout=timeout)
    assert process.returncode == 0, f"{backend}:\n{output[-4000:]}"
    with np.load(out) as data:
        return dict(data)
