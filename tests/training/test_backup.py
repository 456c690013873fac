"""`sbert-keras train` killed, out of disk, or run twice at once: it resumes, finishes or refuses clearly.

The command-line runs here are real processes. Reruns use another
`PYTHONHASHSEED`, as a new shell does, so that a run fingerprint that
depends on set order is caught. The in-process runs, killed after a chosen
step, check that a resumed run equals an uninterrupted one, with dropout.
"""

import json
import os
import re
import signal
import subprocess
import sys

import keras
import numpy as np
import pytest

from conftest import large
from conftest import shared_path
from conftest import tiny_encoder
from harness import LOG_STAGES
from harness import cli_env
from harness import run_on_small_disk
from harness import run_until_paused
from harness import small_disk_available
from harness import start_until_paused
from sbert_keras.cli.parser import main
from sbert_keras.data import examples
from sbert_keras.training import backup
from sbert_keras.training.fit_checks import NonFiniteLossError
from sbert_keras.training.step_log import read_rows
from sbert_keras.training.trainer import train_objective
from sbert_keras.utils import atomic_io

SENTENCES = [
    "a man is playing guitar",
    "a woman is playing piano",
    "the cat sleeps on the sofa",
    "a dog runs in the park",
    "a red car is fast",
    "the blue car is slow",
]
RUN_FILES = ["README.md", "complete.json", "encoder.keras", "metrics.json", "model.keras", "training_log.csv"]


@pytest.fixture
def sts_file(tmp_path):
    """24 STS pairs in the STS benchmark's tab-separated layout."""
    path = tmp_path / "sts.csv"
    rows = zip(SENTENCES * 4, SENTENCES[::-1] * 4)
    path.write_text("".join(f"g\tf\t2012\t{i:04d}\t{i % 6}.000\t{a}\t{b}\n" for i, (a, b) in enumerate(rows)))
    return path


def fixture_model(kind, tmp_path):
    """The tiny RoBERTa (a sentence-transformers folder, KerasHub BPE tokenizer) or a tiny BERT `.keras`."""
    if kind == "roberta":
        return shared_path("reference", "tiny-roberta", "model")
    path = tmp_path / "bert.keras"
    tiny_encoder(normalize=True).save(path)
    return path


def train_args(model, train, output, save_every=1):
    return [
        "train",
        "--objective",
        "regression",
        "--model",
        model,
        "--train",
        train,
        "--output",
        output,
        "--epochs",
        "2",
        "--batch-size",
        "4",
        "--save-every",
        str(save_every),
        "--compute",
        "float32",
        "--quiet",
    ]


def weight_writes(stages):
    return [s for s in stages if "write of weights-" in s]


def assert_complete_run(out, epochs=2, lock_left=False):
    """`out` holds exactly a complete run of `epochs`; no working folder (nor lock file) beside it."""
    assert sorted(os.listdir(out)) == RUN_FILES
    assert len(json.loads((out / "metrics.json").read_text())["history"]["loss"]) == epochs
    assert not os.path.exists(str(out) + atomic_io.PARTIAL_SUFFIX)
    assert os.path.exists(str(out) + ".lock") == lock_left
    atomic_io.check_complete(out)


@pytest.mark.parametrize("kind", ["roberta", "bert"])
@pytest.mark.large
def test_sigkilled_train_resumes_under_another_hash_seed_and_finishes_from_the_saved_partial(
    capsys, tmp_path, sts_file, kind
):
    out = tmp_path / "out"
    args = train_args(fixture_model(kind, tmp_path), sts_file, out)
    # 1. SIGKILL while the second backup is written: the first one (after step 1) exists.
    run_until_paused(args, "weights-0-2.", PYTHONHASHSEED="1")
    state = json.loads((tmp_path / "out.partial" / "backup" / "state.json").read_text())
    assert (state["epoch"], state["steps_done"]) == (0, 1)
    # 2. The same command under another hash seed resumes after step 1 (not refused, not from
    #    scratch), and is killed once encoder.keras, model.keras and metrics.json are saved.
    stages = run_until_paused(args, "finalize", PYTHONHASHSEED="2")
    assert weight_writes(stages)[0] == "sbert-keras test: passed write of weights-0-2.weights.h5"
    partial = tmp_path / "out.partial"
    assert {"encoder.keras", "model.keras", "metrics.json", "backup"} <= set(os.listdir(partial))
    # 3. A third hash seed finishes from what the partial folder holds: no training step, no backup
    #    write. It is killed just after the final rename, before the backup is deleted.
    stages = run_until_paused(args, "backup deletion", PYTHONHASHSEED="3")
    assert not weight_writes(stages), stages
    assert stages[0] == "sbert-keras test: passed final save"
    atomic_io.check_complete(out)  # complete, though its backup is still inside
    # 4. Rerunning it is refused (the run is complete) and drops the leftover backup.
    assert main([str(a) for a in args]) == 2
    assert "already holds a completed run" in capsys.readouterr().err
    assert_complete_run(out, lock_left=True)  # the killed run's lock file: the next run takes it over


@pytest.mark.large
def test_a_second_train_into_the_same_output_is_refused_while_the_first_lives(capsys, tmp_path, sts_file):
    out = tmp_path / "runs" / "out"
    args = train_args(fixture_model("bert", tmp_path), sts_file, out)
    first, _ = start_until_paused(args, "weights-0-2.")
    try:
        lock = tmp_path / "runs" / "out.lock"
        assert lock.read_text().strip() == str(first.pid)
        second = subprocess.run(
            [sys.executable, "-m", "sbert_keras.cli", *map(str, args)],
            env=cli_env(),
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert second.returncode == 2, second.stderr[-2000:]
        assert f"is being written by another run (pid {first.pid}, lock file {lock})" in second.stderr
        assert "Traceback" not in second.stderr
        assert (tmp_path / "runs" / "out.partial" / "backup" / "state.json").is_file()  # the first run's, intact
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
        first.stderr.close()
    # The dead owner's lock file is left behind, holding its pid: the next run takes it over and resumes.
    assert lock.read_text().strip() == str(first.pid)
    assert main([str(a) for a in args]) == 0, capsys.readouterr().err[-2000:]
    assert_complete_run(out)


def test_a_refused_train_leaves_no_lock_and_no_folder(capsys, tmp_path, sts_file):
    out = tmp_path / "runs" / "out"
    args = train_args(fixture_model("bert", tmp_path), tmp_path / "missing.csv", out)
    assert main([str(a) for a in args]) == 2
    assert "missing.csv" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()


# Runs inside the private mount namespace: each step of the JSON plan in argv[1] fills the small
# disk (leaving some bytes free), frees it, or runs the CLI through SHIM; prints what each run did.
DRIVER = r"""
import json, os, shutil, subprocess, sys
disk, shim, plan = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
results = []
for step in plan:
    if "free" in step:
        os.remove(os.path.join(disk, "filler"))
    elif "fill" in step:
        subprocess.run([sys.executable, shim, "--fill", disk, str(step["fill"])], check=True)
    else:
        env = dict(os.environ, **step.get("env", {}))
        done = subprocess.run([sys.executable, shim, *step["run"]], env=env, capture_output=True, text=True)
        files = sorted(os.path.relpath(os.path.join(r, f), disk) for r, _, fs in os.walk(disk) for f in fs)
        results.append({"rc": done.returncode, "stderr": done.stderr, "files": files})
print(json.dumps(results))
"""

# The CLI, with a test hook: `TEST_FILL_AT=<stage>` fills the disk `TEST_DISK` when the run
# reaches that stage.
SHIM = r"""
import os, shutil, sys

def fill(folder, leave):
    with open(os.path.join(folder, "filler"), "ab") as f:
        want = shutil.disk_usage(folder).free - leave
        while want > 0:
            try:
                os.posix_fallocate(f.fileno(), os.fstat(f.fileno()).st_size, want)
                break
            except OSError:
                want -= 4096

if sys.argv[1] == "--fill":
    fill(sys.argv[2], int(sys.argv[3]))
    sys.exit(0)
from sbert_keras.cli import parser
from sbert_keras.utils import atomic_io
fill_at = os.environ.get("TEST_FILL_AT")
if fill_at:
    pause = atomic_io.pause_for_tests
    def pause_then_fill(stage):
        pause(stage)
        if stage == fill_at:
            fill(os.environ["TEST_DISK"], 0)
    atomic_io.pause_for_tests = pause_then_fill
sys.exit(parser.main(sys.argv[1:]))
"""


def run_plan_on_small_disk(tmp_path, size, plan):
    """Runs `plan` (see DRIVER) with a `size` tmpfs at `tmp_path/disk`; returns each run's result."""
    if not small_disk_available():
        pytest.skip("needs root and unshare -m for a private tmpfs")
    disk = tmp_path / "disk"
    disk.mkdir()
    (tmp_path / "driver.py").write_text(DRIVER)
    (tmp_path / "shim.py").write_text(SHIM)
    argv = [sys.executable, str(tmp_path / "driver.py"), str(disk), str(tmp_path / "shim.py"), json.dumps(plan)]
    done = run_on_small_disk(disk, size, argv, env=cli_env(LOG_STAGES, TEST_DISK=str(disk)))
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def assert_one_disk_full_line(result, path, phrase):
    """rc 2 and one error line naming `path` and the space; no stack trace, no crash."""
    assert result["rc"] == 2, result["stderr"][-3000:]
    errors = [line for line in result["stderr"].splitlines() if "error:" in line]
    assert len(errors) == 1 and errors[0].startswith("sbert-keras train: error: not enough disk space for "), errors
    assert path in errors[0] and phrase in errors[0], errors[0]
    for noise in ("Traceback", "h5py", "HDF5", "Segmentation"):
        assert noise not in result["stderr"], result["stderr"][-3000:]


@pytest.mark.large
def test_disk_full_during_the_first_backup_is_one_line_and_leaves_nothing(tmp_path, sts_file):
    disk = tmp_path / "disk"
    run = {"run": [str(a) for a in train_args(fixture_model("bert", tmp_path), sts_file, disk / "out")]}
    failed, rerun = run_plan_on_small_disk(
        tmp_path,
        "4M",
        [{"fill": 100_000}, run, {"free": True}, run],  # 100 KB free: less than the first backup needs
    )
    path = str(disk / "out.partial" / "backup" / "weights-0-1.weights.h5")
    assert_one_disk_full_line(failed, path, "it needs about ")
    assert failed["files"] == ["filler"]  # nothing half-written, no working folder, no lock
    assert rerun["rc"] == 0, rerun["stderr"][-3000:]
    assert sorted(rerun["files"]) == [f"out/{name}" for name in RUN_FILES]


@pytest.mark.large
def test_disk_full_during_the_final_save_then_a_rerun_finishes(tmp_path, sts_file):
    disk = tmp_path / "disk"
    args = [str(a) for a in train_args(fixture_model("roberta", tmp_path), sts_file, disk / "out", save_every=100)]
    failed, rerun = run_plan_on_small_disk(
        tmp_path,
        "32M",
        [
            {"run": args, "env": {"TEST_FILL_AT": "final save", "PYTHONHASHSEED": "1"}},
            {"free": True},
            {"run": args, "env": {"PYTHONHASHSEED": "2"}},
        ],
    )
    assert_one_disk_full_line(failed, str(disk / "out.partial" / "encoder.keras"), "it needs about ")
    assert "out.partial/backup/state.json" in failed["files"]
    assert rerun["rc"] == 0, rerun["stderr"][-3000:]
    stages = [line for line in rerun["stderr"].splitlines() if line.startswith("sbert-keras test: ")]
    assert stages and not weight_writes(stages), stages  # finished from the backup, no epoch again
    assert sorted(rerun["files"]) == [f"out/{name}" for name in RUN_FILES]


# --- In-process kills: the resumed run against the uninterrupted one -----------------------------

PAIRS = [(a, b, i % 6) for i, (a, b) in enumerate(zip(SENTENCES * 4, SENTENCES[::-1] * 4))]


class Killed(Exception):
    """What `KillAfter` raises: the process dies, the backup on disk stays."""


class KillAfter(keras.callbacks.Callback):
    """Raises after the `step`-th training step of the run (counted from 1), once its backup is written."""

    def __init__(self, step):
        super().__init__()
        self.step, self.seen = step, 0

    def on_train_batch_end(self, batch, logs=None):
        self.seen += 1
        if self.seen == self.step:
            raise Killed(f"killed after step {self.step}")


def pairs():
    a, b, scores = zip(*PAIRS)
    return examples.SentencePairs(list(a), list(b), np.array(scores, "float32"))


def train_run(kind, output_dir, callbacks=(), **kwargs):
    """Two epochs of regression on the tiny encoder WITH dropout; a backup after every step."""
    encoder = tiny_encoder(kind=kind, dropout=0.1)
    _, history = train_objective(
        "regression",
        encoder,
        pairs(),
        epochs=2,
        batch_size=4,
        output_dir=str(output_dir),
        save_freq=1,
        verbose=0,
        callbacks=list(callbacks),
        keep_backup=True,
        **kwargs,
    )
    return encoder.get_weights(), history.history


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    """`kind -> (weights, history, step log rows)` of runs never killed (computed once per kind)."""
    runs = {}

    def run(kind):
        if kind not in runs:
            out = tmp_path_factory.mktemp(f"uninterrupted-{kind}")
            weights, history = train_run(kind, out)
            runs[kind] = weights, history, read_rows(out / "training_log.csv")
        return runs[kind]

    return run


def max_abs_difference(a, b):
    return max(float(np.max(np.abs(x - y))) for x, y in zip(a, b, strict=True))


def assert_same_run(got, expected, rows=None, expected_rows=None):
    """Weights within 1e-6, the same per-epoch history, and the same step log."""
    weights, history = got
    assert max_abs_difference(weights, expected[0]) <= 1e-6
    assert history.keys() == expected[1].keys() and len(history["loss"]) == 2
    for key in history:
        np.testing.assert_allclose(history[key], expected[1][key], rtol=0, atol=1e-6)
    if rows is not None:
        assert [r["step"] for r in rows] == [r["step"] for r in expected_rows]
        np.testing.assert_allclose(
            [float(r["mean_loss"]) for r in rows], [float(r["mean_loss"]) for r in expected_rows], atol=1e-6
        )


# 6 steps an epoch: kills early and late in epoch 1, and in epoch 2.
# One kill point in every `make test`; the others, and RoBERTa's, in the large tier.
@pytest.mark.parametrize(
    "kind, kill_after",
    [("bert", 8), *[large(*case) for case in [("bert", 2), ("bert", 5), ("roberta", 3), ("roberta", 9)]]],
)
def test_a_run_killed_anywhere_resumes_to_the_uninterrupted_weights_history_and_log(
    tmp_path, uninterrupted, kind, kill_after
):
    with pytest.raises(Killed):
        train_run(kind, tmp_path, [KillAfter(kill_after)])
    state = json.loads((tmp_path / "backup" / "state.json").read_text())
    assert (state["epoch"], state["steps_done"]) == divmod(kill_after, 6)
    assert state["seed_generators"] and all(seed[1] > 0 for seed in state["seed_generators"])  # dropout drew
    resumed = train_run(kind, tmp_path)
    assert_same_run(resumed, uninterrupted(kind)[:2], read_rows(tmp_path / "training_log.csv"), uninterrupted(kind)[2])


def edit_state(path, **fields):
    state = json.loads(path.read_text())
    path.write_text(json.dumps({**state, **fields}))


DAMAGES = {
    "epoch beyond the run": lambda p: edit_state(p, epoch=99),
    "weights of another step": lambda p: edit_state(p, steps_done=json.loads(p.read_text())["steps_done"] - 1),
    "bad JSON": lambda p: p.write_text("{not json"),
}


@pytest.mark.parametrize(
    "fields, named",
    [
        ({"epoch": 3}, "`epoch` is 3"),
        ({"epoch": "1"}, "`epoch` is '1'"),
        ({"steps_done": -1}, "`steps_done` is -1"),
        ({"steps_done": 6}, "`steps_done` is 6"),
        ({"epoch": 2, "steps_done": 1}, "`steps_done` is 1"),
        ({"history": {"loss": [0.5, 0.4]}}, "`history`"),
        ({"history": {}}, "no loss"),
        ({"seed_generators": []}, "`seed_generators`"),
        ({"seed_generators": [[1, "x"], [2, 3]]}, "`seed_generators`"),
        ({"loss_sums": [float("nan"), 2.0]}, "`loss_sums`"),
    ],
)
def test_check_state_names_the_field_that_cannot_belong_to_the_run(fields, named):
    good = {"epoch": 1, "steps_done": 2, "history": {"loss": [0.5]}, "seed_generators": [[1, 4], [2, 4]]}
    good["loss_sums"] = [3.0, 8.0]
    backup.check_state(good, epochs=2, steps_per_epoch=6, seed_generators=2)
    with pytest.raises(ValueError, match=re.escape(named)):
        backup.check_state({**good, **fields}, epochs=2, steps_per_epoch=6, seed_generators=2)


@pytest.mark.parametrize("damage", [d if d == "weights of another step" else large(d) for d in sorted(DAMAGES)])
def test_an_edited_or_corrupt_backup_restarts_truly_from_step_0(tmp_path, uninterrupted, damage):
    with pytest.raises(Killed):
        train_run("bert", tmp_path, [KillAfter(3)])
    DAMAGES[damage](tmp_path / "backup" / "state.json")
    with pytest.warns(UserWarning, match=r"Ignoring the training backup .*starting fresh from step 0"):
        restarted = train_run("bert", tmp_path)
    # No batch skipped, no history kept: exactly the uninterrupted run, and each step logged once.
    assert_same_run(
        restarted, uninterrupted("bert")[:2], read_rows(tmp_path / "training_log.csv"), uninterrupted("bert")[2]
    )


class BlowUp(keras.callbacks.Callback):
    """Makes the weights finite but far too large for a forward pass after the run's `step`-th step."""

    def __init__(self, step):
        super().__init__()
        self.step, self.seen = step, 0

    def on_train_batch_end(self, batch, logs=None):
        self.seen += 1
        if self.seen == self.step:
            for variable in self.model.encoder.trainable_variables:
                variable.assign(variable * 1e30 + 1e30)


@pytest.mark.parametrize("with_backup", [True, False])
def test_weights_that_stop_being_usable_stop_the_run_naming_the_step(tmp_path, with_backup):
    # The last step of the run leaves weights that encode to NaN; no later step computes a loss.
    output_dir = tmp_path if with_backup else None
    with pytest.raises(NonFiniteLossError, match=r"^Training stopped after step 12: .* not finite") as error:
        train_objective(
            "regression",
            tiny_encoder(),
            pairs(),
            epochs=2,
            batch_size=4,
            output_dir=None if output_dir is None else str(output_dir),
            save_freq=1,
            verbose=0,
            callbacks=[BlowUp(12)],
        )
    assert len(str(error.value).splitlines()) == 1
    if with_backup:  # the last good backup, after step 11, stays
        state = json.loads((tmp_path / "backup" / "state.json").read_text())
        assert (state["epoch"], state["steps_done"]) == (1, 5)
