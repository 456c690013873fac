"""`encode(precision=...)` and `quantize_embeddings` agree with sentence-transformers 6.2 on all-MiniLM-L6-v2.

sentence-transformers runs in a subprocess of the peer virtualenv named by
`SBERT_PEER_PYTHON` (`tests/peer/quantization_check.py`); without it these
tests skip, saying how to create it (as `tests/checkpoints/test_st_writer_peer.py`). On the 310
reference texts, for every output precision: the same dtypes and shapes,
float32 within 1e-5, int8 / uint8 within one bucket, and binary / ubinary
with the same bits, except where a float lies within the float32 tolerance
of the sign threshold (the two libraries' floats differ by up to 1e-5 there).
Fed sentence-transformers' own float vectors, `quantize_embeddings` gives
identical codes, and identical calibration ranges.
"""

import warnings

import numpy as np
import pytest

from checkpoints.test_st_writer_peer import peer_python
from checkpoints.test_st_writer_peer import run_peer
from conftest import ROOT
from conftest import minilm_path
from conftest import read_json
from conftest import shared_path
from sbert_keras import SentenceEncoder
from sbert_keras import quantize_embeddings
from sbert_keras.retrieval.quantization import quantization_ranges

CHECK_SCRIPT = ROOT / "tests" / "peer" / "quantization_check.py"
PRECISIONS = ("float32", "int8", "uint8", "binary", "ubinary")
CALIBRATION = 50  # as the check script
FLOAT_ATOL = 1e-5


@pytest.fixture(scope="module")
def peer(tmp_path_factory):
    """`(our encode outputs by precision, the folder of the peer's outputs)`."""
    peer_python()
    texts_path = shared_path("reference", "all-minilm-l6-v2", "texts.json")
    out = tmp_path_factory.mktemp("quantization-peer")
    run_peer([CHECK_SCRIPT, texts_path, minilm_path(), out])
    encoder = SentenceEncoder.from_preset(minilm_path())
    texts = read_json(texts_path)
    ours = {}
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*truncated.*")
        for precision in PRECISIONS:
            ours[precision] = encoder.encode(texts, show_progress=False, compute="float32", precision=precision)
    return ours, out


def theirs(out, name):
    return np.load(out / f"{name}.npy")


@pytest.mark.parametrize("precision", PRECISIONS)
def test_encode_matches_sentence_transformers(peer, precision):
    ours, out = peer
    got, expected = ours[precision], theirs(out, f"encode-{precision}")
    assert (got.dtype, got.shape) == (expected.dtype, expected.shape)
    if precision == "float32":
        assert np.abs(got - expected).max() <= FLOAT_ATOL
    elif precision.endswith("int8"):
        assert np.abs(got.astype(np.int16) - expected.astype(np.int16)).max() <= 1  # one bucket
    else:
        floats = theirs(out, "encode-float32")
        differ = np.unpackbits(got.view(np.uint8) ^ expected.view(np.uint8), axis=-1)[:, : floats.shape[1]]
        near_zero = np.abs(floats) <= FLOAT_ATOL
        assert not (differ.astype(bool) & ~near_zero).any()  # a bit differs only where the float is ~0
        assert differ.sum() <= 0.001 * differ.size


@pytest.mark.parametrize("precision", PRECISIONS)
def test_quantize_embeddings_gives_the_same_codes_on_the_same_floats(peer, precision):
    _, out = peer
    got = quantize_embeddings(theirs(out, "encode-float32"), precision)
    expected = theirs(out, f"quantize-{precision}")
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("precision", ["int8", "uint8"])
def test_calibration_gives_the_same_ranges_and_codes(peer, precision):
    _, out = peer
    floats = theirs(out, "encode-float32")
    calibration, rest = floats[:CALIBRATION], floats[CALIBRATION:]
    np.testing.assert_array_equal(quantization_ranges(rest, precision, calibration), theirs(out, "ranges"))
    got = quantize_embeddings(rest, precision, calibration_embeddings=calibration)
    np.testing.assert_array_equal(got, theirs(out, f"calibrated-{precision}"))
    ranges = quantization_ranges(rest, precision, calibration)
    np.testing.assert_array_equal(quantize_embeddings(rest, precision, ranges=ranges), got)
