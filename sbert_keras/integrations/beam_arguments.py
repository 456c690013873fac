"""The flags of `sbert-keras embed-corpus`, apart from `beam` so that reading them imports no Apache Beam.

`sbert_keras.cli.parser` builds the `embed-corpus` subparser with
`add_arguments` for `--help` and for parsing; `sbert_keras.integrations.beam`
(which imports Apache Beam and TensorFlow) is imported only when the command
runs, so `sbert-keras embed-corpus --help` prints no Beam or TensorFlow
log line and works without apache-beam installed. Options the parser does
not know (`--runner`, `--direct_num_workers`, ...) go to Beam.
"""

import argparse

from sbert_keras.utils.defaults import BEAM_BATCH_SIZE
from sbert_keras.utils.defaults import COMPUTES
from sbert_keras.utils.defaults import ENCODE_BATCH_SIZE
from sbert_keras.utils.defaults import ENCODE_COMPUTE
from sbert_keras.utils.defaults import INPUT_FORMATS


def _removed_precision(text):
    """argparse `type` of the hidden `--precision`: refused, naming `--compute` (its new name)."""
    raise argparse.ArgumentTypeError(f"renamed --compute: use --compute {text}")


def add_arguments(parser):
    """The options of `sbert-keras embed-corpus` (Beam's own options are passed through); returns `parser`."""
    parser.add_argument("--model", required=True, help="sentence-transformers folder, .keras file or train output")
    parser.add_argument(
        "--input",
        required=True,
        help="file or glob: text lines (ids: 1-based line numbers, <file name>:<line> for several files; "
        "blank lines skipped), or JSON lines {'id', 'text'} (ids: their 'id')",
    )
    parser.add_argument("--output", required=True, help="output folder of Parquet shards (appears when complete)")
    parser.add_argument(
        "--compute",
        default=ENCODE_COMPUTE,
        choices=list(COMPUTES),
        help="dtype the matmuls of encode run in; auto: the fastest that passes the self-check on the worker",
    )
    parser.add_argument("--precision", type=_removed_precision, help=argparse.SUPPRESS)
    parser.add_argument("--batch-size", type=int, default=ENCODE_BATCH_SIZE, help="texts per forward pass")
    parser.add_argument(
        "--beam-batch-size",
        type=int,
        default=BEAM_BATCH_SIZE,
        help="texts per Beam batch (sorted by length, then cut into --batch-size passes)",
    )
    parser.add_argument(
        "--input-format",
        default="auto",
        choices=list(INPUT_FORMATS),
        help="auto: JSON lines for .jsonl/.json files, else text lines",
    )
    parser.add_argument(
        "--normalize",
        action=argparse.BooleanOptionalAction,
        help="L2-normalise the embeddings, or not (default: what the model's configuration says)",
    )
    parser.add_argument(
        "--worker-threads",
        type=int,
        help="TensorFlow threads per Beam worker (default: TensorFlow's own choice)",
    )
    parser.add_argument("--overwrite", action="store_true", help="replace earlier embeddings in --output")
    return parser
