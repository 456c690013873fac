"""Atomic, checked outputs (sbert_keras.utils.atomic_io)."""

import json
import os

import numpy as np
import pytest

from sbert_keras.utils import atomic_io


def test_output_under_a_file_is_refused_before_any_work(tmp_path):
    (tmp_path / "afile").write_text("x")
    with pytest.raises(ValueError, match="afile is a file, not a folder"):
        atomic_io.check_writable(tmp_path / "afile" / "run")
    with pytest.raises(ValueError, match="--output .*afile is a file"):
        atomic_io.prepare_dir(tmp_path / "afile" / "deeper" / "run")


def test_missing_parent_folder_is_named_when_it_is_not_created(tmp_path):
    with pytest.raises(ValueError, match="nodir does not exist"):
        atomic_io.check_writable(tmp_path / "nodir" / "x.npy", create_parents=False)
    assert atomic_io.check_writable(tmp_path / "nodir" / "x.npy") == str(tmp_path / "nodir" / "x.npy")


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write into any folder")
def test_unwritable_folder_is_refused(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        with pytest.raises(ValueError, match="not writable"):
            atomic_io.prepare_dir(locked / "run")
    finally:
        locked.chmod(0o700)


def _complete_run(path):
    path.mkdir()
    for name in atomic_io.RUN_FILES:
        (path / name).write_text("done")
    (path / atomic_io.MARKER).write_text("{}")


def test_a_completed_result_is_replaced_only_with_overwrite(tmp_path):
    run = tmp_path / "run"
    _complete_run(run)
    with pytest.raises(ValueError, match="already holds a completed run; pass --overwrite"):
        atomic_io.prepare_dir(run)
    assert atomic_io.prepare_dir(run, overwrite=True) == str(run)
    (tmp_path / "empty").mkdir()
    assert atomic_io.prepare_dir(tmp_path / "empty") == str(tmp_path / "empty")


def test_overwrite_never_replaces_a_folder_of_other_files(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "thesis.tex").write_text("precious")
    with pytest.raises(ValueError, match="not an sbert_keras result .*thesis.tex"):
        atomic_io.prepare_dir(home, overwrite=True)


def test_finalize_moves_the_working_folder_into_place(tmp_path):
    target = tmp_path / "run"
    _complete_run(target)
    work = atomic_io.partial_dir(str(target))
    assert work == str(target) + ".partial" and os.path.isdir(work)
    with open(os.path.join(work, "metrics.json"), "w") as f:
        f.write("new")
    open(os.path.join(work, ".encoder.keras.tmp-abc.keras"), "w").close()  # a killed save's leftover
    atomic_io.finalize_dir(work, str(target), {"command": "train"})
    assert not os.path.exists(work)
    assert sorted(os.listdir(target)) == [atomic_io.MARKER, "metrics.json"]  # nothing of the old run
    assert json.loads((target / atomic_io.MARKER).read_text())["complete"] is True
    assert [p for p in os.listdir(tmp_path) if p != "run"] == []  # the old run is gone too


def test_check_complete_refuses_incomplete_runs_and_passes_other_folders(tmp_path):
    run = tmp_path / "run"
    _complete_run(run)
    atomic_io.check_complete(run)
    atomic_io.check_complete(run / "encoder.keras")
    half = tmp_path / "half"  # what a kill during the final save used to leave
    half.mkdir()
    (half / "encoder.keras").write_text("2.7 kB")
    atomic_io.check_complete(half / "encoder.keras")  # a lone .keras file is a user's save, not a run
    (half / "model.keras").write_text("the previous run's model")
    (half / "metrics.json").write_text("{}")
    with pytest.raises(atomic_io.IncompleteOutputError, match="half is the output of an incomplete run"):
        atomic_io.check_complete(half)
    with pytest.raises(atomic_io.IncompleteOutputError, match="incomplete run"):
        atomic_io.check_complete(half / "encoder.keras")
    partial = tmp_path / "run2.partial"
    (partial / "backup").mkdir(parents=True)
    with pytest.raises(atomic_io.IncompleteOutputError, match="partial working folder"):
        atomic_io.check_complete(partial)
    st_folder = tmp_path / "st"  # a sentence-transformers folder has no marker and passes
    st_folder.mkdir()
    (st_folder / "config.json").write_text("{}")
    (st_folder / "modules.json").write_text("[]")
    atomic_io.check_complete(st_folder)
    atomic_io.check_complete(tmp_path / "loose.keras")


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "e.npy"
    atomic_io.save_npy(path, np.ones(3))

    def fail(temp):
        with open(temp, "wb") as f:
            f.write(b"half")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        atomic_io.replace_atomically(fail, str(path))
    np.testing.assert_allclose(np.load(path), np.ones(3))
    assert os.listdir(tmp_path) == ["e.npy"]


def test_save_npy_adds_the_suffix_and_returns_the_real_path(tmp_path):
    written = atomic_io.save_npy(str(tmp_path / "emb"), np.zeros((2, 4), "float32"))
    assert written == str(tmp_path / "emb.npy") == atomic_io.npy_path(str(tmp_path / "emb"))
    assert np.load(written).shape == (2, 4)
    mask = os.umask(0)
    os.umask(mask)
    assert os.stat(written).st_mode & 0o777 == 0o666 & ~mask  # not mkstemp's private 0o600


def test_write_dir_leaves_nothing_when_the_write_fails(tmp_path):
    def fail(work):
        open(os.path.join(work, "saved_model.pb"), "w").close()
        raise RuntimeError("tracing failed")

    with pytest.raises(RuntimeError):
        atomic_io.write_dir(fail, tmp_path / "sm" / "1")
    assert os.listdir(tmp_path) == []  # no target, no working folder, no parent folder it made
    atomic_io.write_dir(lambda work: open(os.path.join(work, "saved_model.pb"), "w").close(), tmp_path / "sm" / "1")
    assert atomic_io.is_complete(tmp_path / "sm" / "1")
    with pytest.raises(ValueError, match="already holds a completed run"):
        atomic_io.write_dir(lambda work: None, tmp_path / "sm" / "1")
