"""Multi-worker training with `tf.distribute.MultiWorkerMirroredStrategy`.

Keras 3 on TensorFlow runs `fit` under any `tf.distribute` strategy whose
scope the model was built in: each step runs on every replica, gradients
are all-reduced by TensorFlow's collective ops, and the dataset, batched
with the *global* batch size, is split across the workers by `tf.data`'s
auto-sharding. Nothing here re-implements that engine. This module holds
what it lacks for SBERT:

- `multi_worker_strategy`: the strategy from `TF_CONFIG`, with a clear
  error when the variable is missing or malformed (TensorFlow silently
  falls back to one local worker).
- `tf_config` / `local_cluster`: the `TF_CONFIG` of each worker, and free
  localhost ports to try a cluster on one machine.
- `shard_by_data`: every worker reads the same in-memory examples, so the
  dataset is sharded by element (`AutoShardPolicy.DATA`) instead of the
  default's failed attempt to shard by file.
- `prepare_model`: what Keras 3.15's `fit` needs under the strategy.
  `sbert_keras.losses.replicas` holds what each replica computes (gathered
  negatives, weighted losses).
- `launch_local_workers`: starts one OS process per worker with its
  `TF_CONFIG` (what `torchrun --standalone` does for PyTorch; TensorFlow has
  no launcher). The workers talk through TensorFlow's collectives, not
  through this function: it only starts them and waits.
"""

import contextlib
import functools
import json
import os
import socket
import subprocess
import tempfile
import time

from keras import ops

from sbert_keras.compat import keras_training
from sbert_keras.compat.keras_training import CHECKED_KERAS_VERSION  # noqa: F401 (public here too)
from sbert_keras.utils import backends
from sbert_keras.utils.backends import tensorflow as tf

TF_CONFIG = "TF_CONFIG"


def tf_config(workers, index):
    """The `TF_CONFIG` dict of worker `index` of a cluster.

    Args:
        workers: list of str. Every worker's `"host:port"`, the same list
            (same order) on every machine; worker 0 is the chief.
        index: int. This worker's position in `workers`.

    Example:
    ```python
    os.environ["TF_CONFIG"] = json.dumps(tf_config(["10.0.0.1:12345", "10.0.0.2:12345"], 0))
    ```
    """
    workers = list(workers)
    if not workers or any(not isinstance(w, str) or ":" not in w for w in workers):
        raise ValueError(f"`workers` must be a non-empty list of 'host:port' strings. Received {workers!r}.")
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(workers):
        raise ValueError(f"`index` must be an int in [0, {len(workers)}). Received {index!r}.")
    return {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}


def local_cluster(num_workers):
    """`num_workers` free `"localhost:port"` addresses, for a one-machine cluster."""
    sockets = [socket.socket() for _ in range(num_workers)]
    try:
        for s in sockets:
            s.bind(("localhost", 0))
        return [f"localhost:{s.getsockname()[1]}" for s in sockets]
    finally:
        for s in sockets:
            s.close()


def read_tf_config(environ=None):
    """This process's `TF_CONFIG`, checked; a `ValueError` names what is wrong."""
    text = (os.environ if environ is None else environ).get(TF_CONFIG)
    if not text:
        raise ValueError(
            f"{TF_CONFIG} is not set: multi-worker training needs it on every worker, "
            'e.g. {"cluster": {"worker": ["host1:12345", "host2:12345"]}, "task": {"type": "worker", "index": 0}}.'
        )
    try:
        config = json.loads(text)
        workers, task = config["cluster"]["worker"], config["task"]
        tf_config(workers, task["index"])
    except (ValueError, KeyError, TypeError) as error:
        raise ValueError(f"{TF_CONFIG} is malformed ({error}): {text!r}.") from None
    return config


def check_backend(feature="multi-worker training"):
    """Raises a one-line `NotImplementedError` unless Keras runs on TensorFlow (`tf.distribute`).

    JAX and PyTorch train in one process on one device here; Keras' own
    data parallelism on JAX (`keras.distribution.DataParallel`) is not
    wired into the objectives' train steps.
    """
    backend = backends.keras_backend()
    if backend == "tensorflow":
        backends.require_tensorflow(feature)
        return
    hint = (
        "sbert_keras does not wire keras.distribution.DataParallel into its train steps; " if backend == "jax" else ""
    )
    raise NotImplementedError(
        f"{feature} needs Keras' TensorFlow backend (tf.distribute); it is {backend!r}. "
        f"{hint}Set KERAS_BACKEND=tensorflow."
    )


def multi_worker_strategy(communication="auto"):
    """A `tf.distribute.MultiWorkerMirroredStrategy` from `TF_CONFIG`.

    Create it at the start of the program, before any other TensorFlow
    operation (a TensorFlow requirement), on every worker, then build and
    compile the model under `strategy.scope()`.

    Args:
        communication: str. `"auto"`, `"ring"` (gRPC, CPUs) or `"nccl"`.
    """
    check_backend()
    read_tf_config()
    choices = ("auto", "ring", "nccl")
    if communication not in choices:
        raise ValueError(f"`communication` must be one of {choices}. Received {communication!r}.")
    implementation = tf.distribute.experimental.CommunicationImplementation[communication.upper()]
    options = tf.distribute.experimental.CommunicationOptions(implementation=implementation)
    return tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)


def is_chief(strategy=None):
    """True on worker 0 (or without a multi-worker cluster): the one that saves."""
    if strategy is None and not backends.uses_tensorflow():
        return True  # JAX, PyTorch: one process
    strategy = strategy or tf.distribute.get_strategy()
    resolver = getattr(strategy, "cluster_resolver", None)
    return resolver is None or resolver.task_type in (None, "chief") or resolver.task_id == 0


def shard_by_data(dataset):
    """`dataset` sharded by element across workers (`AutoShardPolicy.DATA`).

    With the global batch `B` and `R` replicas, each step's batch is split
    into `R` slices of `B / R`, one per replica, in order.
    """
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return dataset.with_options(options)


def prepare_model(model):
    """Lets Keras 3.15's `fit` run `model` under `MultiWorkerMirroredStrategy`.

    Two Keras bugs stop `fit` with one replica per worker, and both are
    worked around here, on this model only (checked against Keras
    `CHECKED_KERAS_VERSION`, through `sbert_keras.compat.keras_training`;
    `tests/training/test_distributed.py` compares the run with one process, so a
    Keras that changes them fails there):

    - keras-team/keras#20329: before the first step Keras averages an input
      batch across replicas to build the model, which fails on the siamese
      models' dict inputs. The model is built already (under the scope), so
      Keras is told it was made outside one (`forget_distribute_strategy`)
      and takes the strategy from the scope `fit` runs in.
    - tensorflow/tensorflow#72388: Keras averages each step's logs across
      workers along axis 0, which fails on scalars. The logs are returned
      with shape `(1,)`; the average over workers is a scalar again.

    It also logs the loss of one process. Keras averages the workers'
    running mean losses, each over its own rows, which differs from the
    mean over all rows once a global batch has split unevenly; the logged
    `loss` is the loss tracker's total and count summed over replicas
    (Keras's private loss tracker, a `keras.metrics.Mean`), and the step's
    own loss (`step_loss`, for `step_log.StepLog`) the replicas' losses
    weighted by their rows.

    Call it after `compile`, and call `fit` under `strategy.scope()`.
    Without a multi-worker strategy (scope) it changes nothing. Returns `model`.
    """
    if not backends.uses_tensorflow():
        return model
    if not isinstance(tf.distribute.get_strategy(), tf.distribute.MultiWorkerMirroredStrategy):
        return model
    keras_training.forget_distribute_strategy(model)  # keras-team/keras#20329
    model.train_function = model.test_function = None  # rebuilt with the steps below
    for name in ("train_step", "test_step"):
        step = getattr(type(model), name).__get__(model)
        setattr(model, name, _rank_one_logs(model, step))
    return model


def _rank_one_logs(model, step):
    def wrapped(data):
        logs = dict(step(data))
        context = tf.distribute.get_replica_context()
        tracker = keras_training.loss_tracker(model)
        if "loss" in logs and tracker is not None and context is not None:
            total, count = (
                context.all_reduce(tf.distribute.ReduceOp.SUM, tf.identity(v.value))
                for v in (tracker.total, tracker.count)
            )
            logs["loss"] = tf.math.divide_no_nan(total, count)
        if "step_loss" in logs and context is not None:
            rows = tf.cast(tf.shape(tf.nest.flatten(data)[0])[0], "float32")
            weighted, all_rows = (
                context.all_reduce(tf.distribute.ReduceOp.SUM, v) for v in (logs["step_loss"] * rows, rows)
            )
            logs["step_loss"] = tf.math.divide_no_nan(weighted, all_rows)
        return {key: ops.reshape(value, (-1,)) for key, value in logs.items()}

    return wrapped


def build_in_scope(encoder, strategy):
    """`encoder`, or a copy with the same weights whose variables live in `strategy`'s scope.

    A strategy's variables must be created under its scope; an encoder
    loaded before the strategy existed is rebuilt from its config, sharing
    its preprocessor (which has no variables; its vocabulary is not in the
    config). Copy the trained weights back with
    `encoder.set_weights(copy.get_weights())`.
    """
    check_backend("training under a tf.distribute strategy")
    if all(strategy.extended.variable_created_in_scope(v.value) for v in encoder.weights):
        return encoder
    with strategy.scope():
        copy = type(encoder).from_config({**encoder.get_config(), "preprocessor": encoder.preprocessor})
        copy.set_weights(encoder.get_weights())
    return copy


def under_strategy(train_fn):
    """Decorator: gives `train_fn(objective, encoder, ...)` a `strategy=` argument.

    With a strategy, the encoder is rebuilt in its scope (`build_in_scope`),
    `train_fn` runs under the scope (the model, the optimizer and `fit`),
    and the trained weights are copied back into the caller's encoder.
    `train_fn` calls `prepare_model` when `tf.distribute.has_strategy()`.
    """

    @functools.wraps(train_fn)
    def wrapped(objective, encoder, *args, strategy=None, **kwargs):
        if strategy is None:
            return train_fn(objective, encoder, *args, **kwargs)
        copy = build_in_scope(encoder, strategy)
        with strategy.scope():
            model, history = train_fn(objective, copy, *args, **kwargs)
        if copy is not encoder:
            encoder.set_weights(copy.get_weights())
        return model, history

    return wrapped


def launch_local_workers(argv, num_workers=2, env=None, timeout=None):
    """Runs `argv` as `num_workers` local processes of one cluster.

    Each process gets a `TF_CONFIG` naming a free localhost port per worker
    and its own index; its stdout and stderr go to temporary files (a pipe
    left unread while waiting for another worker would fill up and stall
    the cluster). Returns each worker's `subprocess.CompletedProcess` with
    its output as text. If a worker exits non-zero or the cluster runs past
    `timeout`, the others are killed (they would wait for it forever) and a
    `RuntimeError` names the worker and shows each one's stderr.

    Args:
        argv: list of str. The command of every worker, e.g.
            `[sys.executable, "train.py"]`.
        num_workers: int. Processes to start.
        env: dict or None. Environment of the workers (default: this one's).
        timeout: float or None. Seconds to wait for all of them.

    Example:
    ```python
    launch_local_workers([sys.executable, "-m", "sbert_keras.cli.parser", "train", ...], 2, timeout=600)
    ```
    """
    workers = local_cluster(num_workers)
    deadline = None if timeout is None else time.monotonic() + timeout
    with contextlib.ExitStack() as files:
        logs = [tuple(files.enter_context(tempfile.TemporaryFile("w+")) for _ in "oe") for _ in range(num_workers)]
        processes = [
            subprocess.Popen(
                argv,
                env={**(os.environ if env is None else env), TF_CONFIG: json.dumps(tf_config(workers, index))},
                stdout=out,
                stderr=err,
                text=True,
            )
            for index, (out, err) in enumerate(logs)
        ]
        failure = _wait_all(processes, deadline, timeout)
        results = []
        for process, (out, err) in zip(processes, logs, strict=True):
            out.seek(0), err.seek(0)
            results.append(subprocess.CompletedProcess(argv, process.returncode, out.read(), err.read()))
    if failure:
        details = "\n".join(f"--- worker {i} stderr ---\n{r.stderr[-4000:]}" for i, r in enumerate(results))
        raise RuntimeError(f"{failure}:\n{details}")
    return results


def _wait_all(processes, deadline, timeout):
    """Waits for every process; on a failure or past `deadline` kills the rest. Returns the failure or None."""
    failure = None
    while failure is None and any(p.poll() is None for p in processes):
        failed = [i for i, p in enumerate(processes) if p.poll()]
        if failed:
            failure = f"worker {failed[0]} exited with status {processes[failed[0]].returncode}"
        elif deadline is not None and time.monotonic() > deadline:
            failure = f"the workers ran past {timeout} s"
        else:
            time.sleep(0.2)
    for p in processes:
        if p.poll() is None:
            p.kill()
        p.wait()
    failed = [i for i, p in enumerate(processes) if p.returncode]
    if failure is None and failed:
        failure = f"worker {failed[0]} exited with status {processes[failed[0]].returncode}"
    return failure
