"""`README.md` of a training run's output folder: what each file is for.

`sbert-keras train` leaves several files in `--output`, among them two
`.keras` files of very different use (the encoder to load, and the whole
training model with its optimizer state). `write_run_readme` writes a short
note beside them: the command that made the folder, the run's objective and
epochs, and one line per file present, with its size and what it is for.
It lists the folder as it is when written, plus the files written after it
(the completion marker); the training backup, deleted once the run is
complete, is left out. Written atomically, like every output.

Example:
```python
names = write_run_readme("runs/sts.partial", "sbert-keras train ...", {"objective": "cosent", "epochs": 1},
                         shown_as="runs/sts")
```
"""

import datetime
import os

from sbert_keras.utils import atomic_io
from sbert_keras.utils.disk_space import format_bytes

BACKUP = "backup"

# What each file of a run is for; `{folder}` is the folder as the user named it.
FILE_NOTES = {
    "encoder.keras": (
        "The trained sentence encoder: the file to use. Load it with "
        '`sbert_keras.SentenceEncoder.from_preset("{folder}")` (this folder or this file), or with '
        '`keras.saving.load_model("{folder}/encoder.keras")` once `sbert_keras` is imported '
        "(`from sbert_keras import SentenceEncoder`); on the command line, `--model {folder}/encoder.keras`."
    ),
    "model.keras": (
        "The whole training model: the encoder inside the objective's siamese model, with its head and the "
        "optimizer's state. To continue training from where this run ended (`keras.saving.load_model`, then "
        "`fit`); not needed to encode. (An interrupted run resumes from `{folder}.partial/backup` instead.)"
    ),
    "metrics.json": (
        "The run's settings and figures: the dev figures before and after training (`dev_before`, `dev_after`) "
        "and each epoch's loss and dev figures (`history`)."
    ),
    atomic_io.TRAINING_LOG: (
        "One row per training step: `epoch,step,loss,mean_loss,learning_rate` (the step's own loss, the "
        "epoch's running mean that the progress bar showed, and the learning rate applied at the step)."
    ),
    atomic_io.RUN_README: "This note.",
    atomic_io.MARKER: (
        "The completion marker, written last: the run finished and every file here is whole "
        "(loaders refuse a run folder without it)."
    ),
}
OTHER_FILE = "Written by this run."


def run_files(folder, written_after=(atomic_io.MARKER,)):
    """The names a finished run folder holds: `folder`'s entries, this note and `written_after`, less the backup."""
    names = {name for name in os.listdir(folder) if not (name.startswith(".") and ".tmp-" in name)}
    names |= {atomic_io.RUN_README, *written_after}
    names.discard(BACKUP)  # deleted once the run is complete
    order = list(FILE_NOTES)
    return sorted(names, key=lambda name: (order.index(name) if name in order else len(order), name))


def readme_text(folder, names, command, settings, shown_as):
    """The note's Markdown: title, command, settings, then one line per name in `names`."""
    settings = settings or {}
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = ["# sbert-keras training run", "", f"Written on {when} by:", "", "```", command or "(unknown)", "```", ""]
    facts = [f"{key.replace('_', ' ')}: `{value}`" for key, value in settings.items() if value is not None]
    if facts:
        lines += ["; ".join(facts) + ".", ""]
    lines += ["## Files", ""]
    for name in names:
        path = os.path.join(folder, name)
        sized = os.path.isfile(path) and name != atomic_io.RUN_README  # the note itself is being written
        size = f" ({format_bytes(os.path.getsize(path))})" if sized else ""
        note = FILE_NOTES.get(name, OTHER_FILE).format(folder=shown_as)
        lines.append(f"- `{name}`{size}: {note}")
    return "\n".join(lines) + "\n"


def write_run_readme(folder, command, settings=None, shown_as=None, written_after=(atomic_io.MARKER,)):
    """Writes `README.md` into a run's folder, listing its files; returns the names listed.

    Args:
        folder: str. The run's (working) folder, holding its other outputs.
        command: str. The command line that made the run.
        settings: dict or None. Facts shown in one sentence, e.g.
            `{"objective": "cosent", "epochs": 1}` (None values are left out).
        shown_as: str or None. The folder's name in the text (the final
            `--output`; default `folder`).
        written_after: names the folder gets after the note (the marker).
    """
    names = run_files(folder, written_after)
    text = readme_text(folder, names, command, settings, shown_as or folder)

    def write(temp):
        with open(temp, "w", encoding="utf-8") as f:
            f.write(text)

    atomic_io.replace_atomically(write, os.path.join(folder, atomic_io.RUN_README), ".md")
    return names
