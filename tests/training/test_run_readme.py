"""The note that lists a training run's files (`sbert_keras.training.run_readme`)."""

import os
import re

from sbert_keras.training.run_readme import FILE_NOTES
from sbert_keras.training.run_readme import write_run_readme
from sbert_keras.utils import atomic_io


def listed(folder):
    """The file names the note lists, one per `- \\`name\\`` line, in order."""
    text = (folder / atomic_io.RUN_README).read_text()
    return re.findall(r"^- `([^`]+)`", text, flags=re.MULTILINE)


def test_the_note_lists_exactly_the_files_of_the_finished_folder(tmp_path):
    work = tmp_path / "run.partial"
    (work / "backup").mkdir(parents=True)  # deleted once the run is complete
    for name, size in (
        ("encoder.keras", 2000),
        ("model.keras", 6000),
        ("metrics.json", 10),
        (atomic_io.TRAINING_LOG, 5),
    ):
        (work / name).write_bytes(b"x" * size)
    (work / ".model.keras.tmp-1.keras").write_bytes(b"")  # a save killed earlier: removed by finalize_dir
    (work / "extra.txt").write_text("?")
    command = "sbert-keras train --objective cosent --epochs 2 --output runs/x"
    names = write_run_readme(str(work), command, {"objective": "cosent", "epochs": 2, "limit": None}, "runs/x")
    atomic_io.finalize_dir(str(work), str(tmp_path / "run"), {"command": "train", "files": names})
    (tmp_path / "run" / "backup").rmdir()
    folder = tmp_path / "run"
    assert sorted(listed(folder)) == sorted(os.listdir(folder)) == sorted(names)
    assert listed(folder)[:3] == ["encoder.keras", "model.keras", "metrics.json"]  # the file to use first
    text = (folder / atomic_io.RUN_README).read_text()
    assert command in text and "objective: `cosent`; epochs: `2`." in text and "limit" not in text
    assert "- `encoder.keras` (2.0 kB): The trained sentence encoder: the file to use." in text
    assert 'SentenceEncoder.from_preset("runs/x")' in text and "- `extra.txt` (1 B): Written by this run." in text
    assert "- `model.keras` (6.0 kB): The whole training model" in text and "optimizer's state" in text


def test_every_file_a_run_writes_has_a_note():
    assert {*atomic_io.RUN_FILES, atomic_io.TRAINING_LOG, atomic_io.RUN_README, atomic_io.MARKER} == set(FILE_NOTES)
