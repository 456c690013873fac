"""`sbert-keras train` killed, out of disk, or run twice at once: it resumes, finishes or refuses clearly.

Every run here is a real process. Reruns use another `PYTHONHASHSEED`, as a
new shell does, so that a run fingerprint that depends on set order is caught.
"""

import json
import os
import signal
import subprocess
import sys

import pytest

from conftest import shared_path
from conftest import tiny_encoder
from harness import LOG_STAGES
from harness import cli_env
from harness import run_on_small_disk
from harness import run_until_paused
from harness import small_disk_available
from harness import start_until_paused
from sbert_keras.cli.parser import main
from sbert_keras.utils import atomic_io as outputs

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
        "--precision",
        "float32",
        "--quiet",
    ]


def weight_writes(stages):
    return [s for s in stages if "write of weights-" in s]


def assert_complete_run(out, epochs=2, lock_left=False):
    """`out` holds exactly a complete run of `epochs`; no working folder (nor lock file) beside it."""
    assert sorted(os.listdir(out)) == RUN_FILES
    assert len(json.loads((out / "metrics.json").read_text())["history"]["loss"]) == epochs
    assert not os.path.exists(str(out) + outputs.PARTIAL_SUFFIX)
    assert os.path.exists(str(out) + ".lock") == lock_left
    outputs.check_complete(out)


@pytest.mark.parametrize("kind", ["roberta", "bert"])
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
    outputs.check_complete(out)  # complete, though its backup is still inside
    # 4. Rerunning it is refused (the run is complete) and drops the leftover backup.
    assert main([str(a) for a in args]) == 2
    assert "already holds a completed run" in capsys.readouterr().err
    assert_complete_run(out, lock_left=True)  # the killed run's lock file: the next run takes it over


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
from sbert_keras.cli import parser as cli
from sbert_keras.utils import atomic_io as outputs
fill_at = os.environ.get("TEST_FILL_AT")
if fill_at:
    pause = outputs.pause_for_tests
    def pause_then_fill(stage):
        pause(stage)
        if stage == fill_at:
            fill(os.environ["TEST_DISK"], 0)
    outputs.pause_for_tests = pause_then_fill
sys.exit(cli.main(sys.argv[1:]))
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
