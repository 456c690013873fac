"""`sbert-keras train`: fine-tune an encoder with one objective, resumably.

The command of `sbert_keras.cli.parser`'s `train` parser, apart from the other
commands (`sbert_keras.cli.commands`) because it is the largest: its flags
were checked against `--objective` by `sbert_keras.cli.flag_checks`; the
output folder and the training data are checked before a model loads (the
training file read by the objective's reader, `cli_commands.read_examples`),
and the run goes to `<output>.partial`, which resumes when interrupted, before it is
renamed to `--output`. While it runs, `<output>.lock` (`output_lock`) holds
its pid, and a second run into the same `--output` is refused. The training
itself is `sbert_keras.training.trainer.train_objective` (its progress, dev
lines and step log `training_log.csv`); this module saves the encoder, the
model and `metrics.json`, has `training.run_readme` list them in the
folder's `README.md`, and ends with a line naming the encoder. Like
`sbert_keras.cli.commands`, this module imports TensorFlow at its top, and
`sbert_keras.cli.parser.main` imports it only when `train` runs.

Example:
```python
from sbert_keras.cli.parser import build_parser
args = build_parser().parse_args(["train", "--objective", "cosent", "--model", "m.keras",
                                  "--train", "sts-train.csv", "--output", "runs/cosent"])
cmd_train(args)  # {"objective": "cosent", "history": {...}, "encoder": "runs/cosent/encoder.keras", ...}
```
"""

import os
import shlex
import shutil
import sys
import tempfile
import time
import warnings

import keras

from sbert_keras.cli.commands import evaluate_all
from sbert_keras.cli.commands import load_encoder
from sbert_keras.cli.commands import read_examples
from sbert_keras.data import examples
from sbert_keras.training import backup
from sbert_keras.training import distributed
from sbert_keras.training import run_readme
from sbert_keras.training import trainer
from sbert_keras.utils import atomic_io
from sbert_keras.utils import disk_space
from sbert_keras.utils.checksums import file_sha256
from sbert_keras.utils.output_lock import OutputLock


def cmd_train(args):
    """Trains into `<output>.partial` (which resumes), then renames it to `--output`.

    Every flag, the data and the output folder are checked before the model
    loads; the backup is saved every `--save-every` steps and tied to this
    run's configuration and data. `--compute` sets Keras' global dtype
    policy for the run only: the caller's policy is restored afterwards
    (`main()` may run in a notebook or a test process).
    """
    previous = keras.config.dtype_policy()
    try:
        return train_command(args)
    finally:
        keras.config.set_dtype_policy(previous)


def train_command(args):
    """The body of `cmd_train`, under the run's dtype policy."""
    # The strategy comes before any other TensorFlow op; the other workers train into a scratch folder.
    strategy = distributed.multi_worker_strategy() if getattr(args, "strategy", "none") == "multi-worker" else None
    if strategy is not None and not distributed.is_chief(strategy):
        args.output = os.path.join(tempfile.mkdtemp(prefix="sbert-keras-worker-"), "run")
    model_kwargs = train_model_kwargs(args)
    drop_leftover_backup(args.output)
    target = atomic_io.prepare_dir(args.output, overwrite=args.overwrite)
    train = read_examples(args.train, args.objective, args.limit)
    if not len(train):
        skipped = getattr(train, "num_skipped", 0)
        note = f" ({skipped} unlabelled line(s) skipped)" if skipped else ""
        raise ValueError(f"--train {args.train}: no labelled training examples{note}.")
    try:
        with warnings.catch_warnings():  # said once, by the training run
            warnings.simplefilter("ignore")
            trainer.objective_inputs(args.objective, train, hard_negatives=args.hard_negatives)
    except (TypeError, ValueError) as error:
        raise ValueError(f"--train {args.train} does not fit --objective {args.objective}: {error}") from None
    dev = read_examples(args.dev) if args.dev else None
    created = atomic_io.first_missing_folder(target)
    try:
        with OutputLock(target):
            report = train_into(args, target, train, dev, strategy, model_kwargs)
    finally:
        atomic_io.remove_empty_folders(os.path.dirname(target), created)  # made for a run that failed
    if strategy is None or distributed.is_chief(strategy):
        print(
            f"sbert-keras train: the trained encoder is {os.path.join(target, 'encoder.keras')} "
            f"(SentenceEncoder.from_preset or --model); {os.path.join(target, atomic_io.RUN_README)} "
            "says what each file of the run is.",
            file=sys.stderr,
        )
    return report


def train_into(args, target, train, dev, strategy, model_kwargs):
    """Trains into `<target>.partial` and renames it to `target`; the caller holds the output's lock.

    Until the rename, the working folder keeps the backup, so a run killed
    at any point (even with the encoder and model saved) resumes where it
    was; the backup is deleted only from the renamed, complete folder.

    Args:
        args: the parsed `train` arguments.
        target: str. The absolute `--output` folder.
        train: the training examples.
        dev: the dev examples or None.
        strategy: a `tf.distribute` strategy or None.
        model_kwargs: dict. `train_model_kwargs(args)`.
    """
    atomic_io.prepare_dir(target, overwrite=args.overwrite)  # again, now that no other run can write it
    work = atomic_io.partial_dir(target)
    try:
        compute = trainer.set_compute(args.compute)
        encoder, _ = load_encoder(args.model, sequence_length=args.sequence_length)
        teacher = load_encoder(args.teacher)[0] if args.teacher else None
        before = evaluate_all(encoder, sts=dev) if dev_is_sts(dev) else {}
        if before:
            print(f"Before training - dev_spearman_cosine: {before['spearman_cosine']:.4f}")
        start = time.perf_counter()
        run_info = {"model": args.model, "train_file_sha256": file_sha256(args.train), "limit": args.limit}
        if teacher is not None:
            run_info["teacher"] = args.teacher
        model, history = trainer.train_objective(
            args.objective,
            encoder,
            train,
            dev=dev,
            epochs=args.epochs,
            batch_size=args.batch_size,
            learning_rate=args.lr,
            output_dir=work,
            seed=args.seed,
            verbose=2 if args.quiet else "auto",
            save_freq=args.save_every,
            overwrite=args.overwrite,
            keep_backup=True,
            run_info=run_info,
            strategy=strategy,
            batching=getattr(args, "batching", None),
            teacher=teacher,
            weight_decay=args.weight_decay,
            clipnorm=args.clip_norm,
            **model_kwargs,
        )
        seconds = time.perf_counter() - start
        atomic_io.pause_for_tests("final save")
        for saved, name, with_optimizer in ((encoder, "encoder.keras", False), (model, "model.keras", True)):
            path = os.path.join(work, name)
            disk_space.check_free_space(path, backup.weights_bytes(saved, include_optimizer=with_optimizer))
            atomic_io.replace_atomically(saved.save, path, ".keras")
        report = {
            "objective": args.objective,
            "model": args.model,
            "compute": compute,
            "backend": keras.backend.backend(),
            "train_file": args.train,
            "dev_file": args.dev,
            "batch_size": args.batch_size,
            "learning_rate": args.lr,
            "train_examples": len(train),
            "epochs": args.epochs,
            "seed": args.seed,
            "weight_decay": args.weight_decay,
            "clip_norm": args.clip_norm,
            **model_kwargs,
            **({"teacher": args.teacher} if teacher is not None else {}),
            "train_seconds": round(seconds, 2),
            "dev_before": before,
            "dev_after": {k[4:]: v[-1] for k, v in history.history.items() if k.startswith("dev_")},
            "history": {k: [float(x) for x in v] for k, v in history.history.items()},
            "encoder": os.path.join(args.output, "encoder.keras"),
            "training_log": os.path.join(args.output, atomic_io.TRAINING_LOG),
            "readme": os.path.join(args.output, atomic_io.RUN_README),
        }
        atomic_io.write_json(os.path.join(work, "metrics.json"), report)
        keys = ("objective", "epochs", "train_examples", "compute", "backend", "seed")
        settings = {key: report[key] for key in keys}
        settings.update(batch_size=args.batch_size, learning_rate=args.lr, train_seconds=report["train_seconds"])
        files = run_readme.write_run_readme(work, command_line(args), settings, shown_as=args.output)
        atomic_io.finalize_dir(work, target, {"command": "train", "files": files})
    except BaseException:
        atomic_io.remove_partial(work)  # kept only when it holds a backup to resume
        raise
    atomic_io.pause_for_tests("backup deletion")
    backup.RunBackup(os.path.join(target, "backup")).delete()
    return report


def command_line(args):
    """The `sbert-keras train` command of parsed `args`, every setting spelled out (for the run's README)."""
    words = ["sbert-keras", "train"]
    for name, value in vars(args).items():
        if name in ("command", "fn") or value is None or value is False:
            continue
        flag = "--" + name.replace("_", "-")
        if value is True:
            words.append(flag)
        elif isinstance(value, (list, tuple)):
            words += [flag, ",".join(map(str, value))]
        else:
            words += [flag, str(value)]
    return shlex.join(words)


def drop_leftover_backup(output):
    """Deletes the backup a run killed just after its final rename left in its complete `output`.

    Args:
        output: str. The `--output` folder.
    """
    leftover = os.path.join(output, "backup")
    if atomic_io.is_complete(output) and os.path.isdir(leftover):
        shutil.rmtree(leftover)


def train_model_kwargs(args):
    """The model arguments of `train`'s flags (`sbert_keras.cli.flag_checks` checked them against `--objective`)."""
    kwargs = {"matryoshka_dims": args.matryoshka_dims} if args.matryoshka_dims else {}
    if args.hard_negatives:
        kwargs["hard_negatives"] = True
    if args.mini_batch_size:
        kwargs["mini_batch_size"] = args.mini_batch_size
    return kwargs


def dev_is_sts(dev):
    """Whether the dev examples are STS pairs (their score before training is reported too)."""
    return type(dev) is examples.SentencePairs
