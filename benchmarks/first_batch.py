"""Time to the first training batch: `siamese_dataset` on STS-B train, built and read, on TensorFlow.

What `train_objective` waits for before its first step, and what each
epoch's input costs: building the dataset of STS-B train pairs (the texts
tokenised, the bucket lengths counted), its first batch, then two whole
passes (`passes=range(2)`, as `train_objective` reads them), for each
batching (`"bucket"`, `"no_duplicates"`, `"shuffle"`). Each model and
batching runs in its own process, as a training run would: all-MiniLM-L6-v2 (WordPiece), the tiny RoBERTa of
`../shared/reference` (byte-level BPE, KerasHub's tokenizer graph) and, with
`--mpnet FOLDER`, all-mpnet-base-v2. One JSON line per model and batching.

Usage:
```
.venv/bin/python benchmarks/first_batch.py [--quick] [--mpnet FOLDER] 2>/dev/null
```
"""

import argparse
import os
import subprocess
import sys
import time

import numpy as np
from common import base_parser
from common import emit
from common import model_path
from common import shared_files

BENCHMARK = "first_batch"
BATCHINGS = ("bucket", "no_duplicates", "shuffle")
ROLES = ("sentence_a", "sentence_b")


def measure(folder, batching, sts_train, pairs, batch_size=16, sequence_length=128):
    """Emits the seconds to build the dataset, read its first batch and read two passes, from `from_preset` on."""
    from sbert_keras import SentenceEncoder
    from sbert_keras.data import readers
    from sbert_keras.training.pipelines import siamese_dataset

    train = readers.read_sts(sts_train)
    columns = [train.sentence_a[:pairs], train.sentence_b[:pairs]]
    labels = np.asarray(train.labels[:pairs], "float32") / 5.0
    preprocessor = SentenceEncoder.from_preset(folder, sequence_length=sequence_length).preprocessor
    start = time.perf_counter()
    ds = siamese_dataset(
        columns, labels, preprocessor, ROLES, batch_size, seed=0, batching=batching, epochs=2, passes=range(2)
    )
    built = time.perf_counter()
    batches = iter(ds)
    next(batches)
    first = time.perf_counter()
    count = 1 + sum(1 for _ in batches)
    done = time.perf_counter()
    path = os.path.normpath(str(folder))
    emit(
        benchmark=BENCHMARK,
        model=os.path.basename(os.path.dirname(path) if os.path.basename(path) == "model" else path),
        batching=batching,
        pairs=len(labels),
        batches=count,
        build_s=round(built - start, 3),
        first_batch_s=round(first - start, 3),
        two_passes_s=round(done - start, 3),
    )


def main(argv=None):
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--mpnet", default=None, help="all-mpnet-base-v2 folder (`fetch_mpnet.py` prints it)")
    parser.add_argument("--one", nargs=2, default=None, help=argparse.SUPPRESS)  # a child: FOLDER BATCHING
    args = parser.parse_args(argv)
    paths = shared_files(BENCHMARK, "data/stsbenchmark/sts-train.csv", "reference/tiny-roberta/model/config.json")
    minilm = model_path(BENCHMARK)
    if paths is None or minilm is None:
        return
    pairs = 256 if args.quick else None
    if args.one:
        measure(*args.one, paths[0], pairs)
        return
    folders = [minilm, paths[1].parent, *([args.mpnet] if args.mpnet else [])]
    for folder in folders:
        for batching in BATCHINGS:  # each in a fresh process: no tokenizer trace or tf.data state carries over
            command = [sys.executable, __file__, "--one", str(folder), batching, *(["--quick"] if args.quick else [])]
            subprocess.run(command, check=True)


if __name__ == "__main__":
    main()
