"""What knowing that the weights changed costs a single query: before and after a compiled `fit`.

`encode` reuses weights it derived from the encoder's (cast, fused,
converted) only while the encoder's own weights are unchanged. The check
is Python counters set by write hooks on the encoder's variables plus, once
a compiled graph has written them, one scalar read
(`sbert_keras.runtime.weight_writes`). This prints, for all-MiniLM-L6-v2
after `warmup`, the median of one short query through `encode` and of the
check alone (`FusedWeights.written`), on a fresh encoder and after one
compiled training step on it.

Usage:
```
.venv/bin/python benchmarks/staleness_check.py [--quick] 2>/dev/null
```
"""

import statistics
import time
import warnings

import keras
import numpy as np
from common import base_parser
from common import emit
from common import model_path

import sbert_keras as sk
from sbert_keras.training.siamese import RegressionSiamese

BENCHMARK = "staleness_check"
QUERY = ["one short query"]


def median_us(function, calls, repeat=1):
    """Median over `calls` timings of `repeat` back-to-back calls of `function`, in µs per call."""
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        for _ in range(repeat):
            function()
        times.append((time.perf_counter() - start) / repeat)
    return 1e6 * statistics.median(times)


def report(encoder, stage, calls):
    weights = next(iter(encoder.engine.graphs._weights.values()))  # the batches' cast weights
    emit(
        benchmark=BENCHMARK,
        stage=stage,
        encode_query_median_us=median_us(lambda: encoder.encode(QUERY), calls),
        check_median_us=median_us(weights.written, calls, 100),
        calls=calls,
    )


def main():
    args = base_parser(__doc__.splitlines()[0]).parse_args()
    folder = model_path(BENCHMARK)
    if folder is None:
        return
    calls = 30 if args.quick else 300
    encoder = sk.SentenceEncoder.from_preset(str(folder))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        encoder.warmup(verbose=False)
    for _ in range(30):
        encoder.encode(QUERY)
    report(encoder, "fresh", calls)
    model = RegressionSiamese(encoder)
    model.compile(optimizer=keras.optimizers.SGD(0.0))  # a compiled step that writes the weights, unchanged
    model.fit((np.array(["a b"]), np.array(["c d"])), np.array([0.5], "float32"), verbose=0)
    encoder.encode(QUERY)  # the refresh after the write
    report(encoder, "after_fit", calls)


if __name__ == "__main__":
    main()
