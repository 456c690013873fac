"""Quantized output embeddings: `quantize_embeddings` and `encode(precision=...)`, as sentence-transformers.

`precision` is what `encode` returns (float32, int8, uint8, binary,
ubinary); `compute` the dtype the matmuls run in. The compute words given
as `precision` fail with one line naming `compute`.
"""

import warnings

import numpy as np
import pytest
import tensorflow as tf

import sbert_keras
from conftest import tiny_encoder
from sbert_keras import quantize_embeddings
from sbert_keras.retrieval.quantization import quantization_ranges

TEXTS = ["a man plays a guitar", "the dog runs", "a red car", "a cat sleeps on the sofa", "blue sky", "fast food"]
WIDTHS = {"float32": 20, "int8": 20, "uint8": 20, "binary": 3, "ubinary": 3}
DTYPES = {"float32": np.float32, "int8": np.int8, "uint8": np.uint8, "binary": np.int8, "ubinary": np.uint8}


def floats(n=150, dim=20, seed=0):
    return np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32)


@pytest.mark.parametrize("precision", list(DTYPES))
def test_dtypes_and_shapes(precision):
    out = quantize_embeddings(floats(), precision)
    assert out.dtype == DTYPES[precision] and out.shape == (150, WIDTHS[precision])
    one = quantize_embeddings(floats()[0], precision, calibration_embeddings=floats())
    assert one.dtype == DTYPES[precision] and one.shape == (WIDTHS[precision],)  # a 1-D vector stays 1-D
    empty = quantize_embeddings(np.zeros((0, 20), np.float32), precision)
    assert empty.dtype == DTYPES[precision] and empty.shape == (0, WIDTHS[precision])


def test_binary_packs_the_first_dimension_into_the_high_bit():
    x = np.array([[0.5, -1.0, 0.0, -0.0, -2.0, -3.0, -0.1, 0.1, 3.0]], np.float32)  # 9 dims: 2 bytes
    ubinary = quantize_embeddings(x, "ubinary")
    assert ubinary.tolist() == [[0b10000001, 0b10000000]]  # 0 is not above the threshold; padding bits are 0
    assert quantize_embeddings(x, "binary").tolist() == [[0b10000001 - 128, 0b10000000 - 128]]
    codes = quantize_embeddings(floats(), "ubinary")
    np.testing.assert_array_equal(np.unpackbits(codes, axis=-1)[:, :20], floats() > 0)
    np.testing.assert_array_equal(quantize_embeddings(floats(), "binary").astype(np.int16) + 128, codes)


def test_scalar_buckets_span_the_ranges():
    x = np.array([[0.0, 1.0, 5.0], [1.0, -1.0, 5.0], [0.5, 0.0, 5.0]], np.float32)
    with pytest.warns(UserWarning, match="from 3 embeddings"):
        uint8 = quantize_embeddings(x, "uint8")
    # The float32 steps of sentence-transformers: floor((x - min) / ((max - min) / 255)), so the max may be 254.
    assert uint8[0, 0] == 0 and uint8[1, 0] >= 254 and uint8[2, 0] == 127 and uint8[1, 1] == 0
    np.testing.assert_array_equal(uint8[:, 0], uint8[[1, 0, 2], 1])  # the same values, mirrored
    assert uint8[:, 2].tolist() == [0, 0, 0]  # an empty range has step 1
    int8 = quantize_embeddings(x, "int8", ranges=quantization_ranges(x, "int8", x))
    np.testing.assert_array_equal(int8.astype(np.int16), uint8.astype(np.int16) - 128)
    ranges = np.array([[0.0, -2.0, 0.0], [0.5, 2.0, 1.0]], np.float32)
    clipped = quantize_embeddings(x, "uint8", ranges=ranges)  # values outside the ranges clip
    assert clipped[0, 0] == 0 and clipped[1, 0] == 255 and clipped[:, 2].tolist() == [255, 255, 255]


def test_calibration_embeddings_give_the_ranges():
    sample, x = floats(300, seed=1), floats(10, seed=2)
    ranges = quantization_ranges(x, "int8", sample)
    np.testing.assert_array_equal(ranges, np.stack([sample.min(0), sample.max(0)]))
    calibrated = quantize_embeddings(x, "int8", calibration_embeddings=sample)
    np.testing.assert_array_equal(calibrated, quantize_embeddings(x, "int8", ranges=ranges))
    both = np.concatenate([x, sample])
    np.testing.assert_array_equal(quantize_embeddings(both, "uint8")[len(x) :], quantize_embeddings(sample, "uint8"))
    matrices = quantize_embeddings([floats(3, seed=3), floats(120, seed=4)], "uint8")  # shared ranges
    shared = quantization_ranges(np.concatenate([floats(3, seed=3), floats(120, seed=4)]))
    np.testing.assert_array_equal(matrices[0], quantize_embeddings(floats(3, seed=3), "uint8", ranges=shared))


def test_few_embeddings_warn_and_one_refuses():
    with pytest.warns(UserWarning, match="int8 quantization ranges from 5 embeddings"):
        quantize_embeddings(floats(5), "int8")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        quantize_embeddings(floats(5), "int8", calibration_embeddings=floats(5))  # the user's own calibration
        quantize_embeddings(floats(5), "binary")
    with pytest.raises(ValueError, match="single embedding; pass `ranges` or `calibration_embeddings`"):
        quantize_embeddings(floats(1), "uint8")


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: quantize_embeddings(floats(), "int4"), r"`precision` must be one of float32, int8, .*'int4'"),
        (lambda: quantize_embeddings(floats().astype(np.int8), "binary"), r"`embeddings` .*int8 \(already quantized"),
        (lambda: quantize_embeddings(floats()[None], "binary"), r"`embeddings` must be 1-D or 2-D"),
        (lambda: quantize_embeddings(floats(), "int8", ranges=np.zeros((2, 3))), r"`ranges` must have shape \(2, 20\)"),
        (
            lambda: quantize_embeddings(floats(), "int8", calibration_embeddings=floats(dim=4)),
            "`calibration_embeddings` must have 20 dimensions",
        ),
        (lambda: quantize_embeddings([["a", "b"]], "binary"), "`embeddings` must be a float array"),
    ],
)
def test_bad_input_is_one_line_naming_the_argument(call, message):
    with pytest.raises((ValueError, TypeError), match=message) as error:
        call()
    assert "\n" not in str(error.value)


def test_scores_refuse_quantized_embeddings():
    codes = quantize_embeddings(floats(), "ubinary")
    with pytest.raises(ValueError, match=r"`a` holds uint8 \(quantized\) embeddings"):
        sbert_keras.similarity_matrix(codes)
    with pytest.raises(ValueError, match=r"`query_embeddings` holds int8"):
        sbert_keras.semantic_search(quantize_embeddings(floats(), "int8")[:2], floats())


def test_the_index_refuses_quantized_embeddings():
    pytest.importorskip("faiss")
    with pytest.raises(ValueError, match=r"`embeddings` holds uint8 \(quantized\) embeddings"):
        sbert_keras.EmbeddingIndex.build(quantize_embeddings(floats(), "ubinary"), kind="flat")


@pytest.fixture(scope="module")
def encoder():
    return tiny_encoder(normalize=True)


@pytest.mark.parametrize("precision", ["float32", "binary", "ubinary"])
def test_encode_quantizes_after_normalising(encoder, precision):
    vectors = encoder.encode(TEXTS, compute="float32")
    out = encoder.encode(TEXTS, compute="float32", precision=precision)
    assert out.dtype == DTYPES[precision] and out.shape == (len(TEXTS), 8 if precision == "float32" else 1)
    np.testing.assert_allclose(out, quantize_embeddings(vectors, precision), atol=1e-6)
    one = encoder.encode(TEXTS[0], compute="float32", precision=precision)
    assert one.shape == out.shape[1:] and one.dtype == out.dtype  # one text, one row
    assert encoder.encode([], precision=precision).shape == (0, out.shape[1])


def test_encode_int8_takes_the_ranges_of_its_texts(encoder):
    vectors = encoder.encode(TEXTS, compute="float32")
    with pytest.warns(UserWarning, match="from 6 embeddings"):
        out = encoder.encode(TEXTS, compute="float32", precision="uint8")
    assert out.dtype == np.uint8 and out.shape == (6, 8)
    expected = quantize_embeddings(vectors, "uint8", calibration_embeddings=vectors)
    assert np.abs(out.astype(int) - expected).max() <= 1
    with pytest.raises(ValueError, match="single embedding"):
        encoder.encode(TEXTS[0], precision="int8")  # as sentence-transformers: no ranges from one text


def test_encode_truncate_dim_then_quantize(encoder):
    cut = encoder.encode(TEXTS, compute="float32", truncate_dim=4)
    packed = encoder.encode(TEXTS, compute="float32", truncate_dim=4, precision="ubinary")
    np.testing.assert_array_equal(packed, np.packbits(cut > 0, axis=-1))
    assert packed.shape == (6, 1)


def test_encode_convert_to_tensor_keeps_the_quantized_dtype(encoder):
    out = encoder.encode(TEXTS, compute="float32", precision="binary", convert_to_tensor=True)
    assert isinstance(out, tf.Tensor) and out.dtype == tf.int8 and out.shape == (6, 1)


def test_compute_int8_is_a_compute_path_not_an_output_dtype(encoder):
    out = encoder.encode(TEXTS, compute="int8")
    assert out.dtype == np.float32 and out.shape == (6, 8)


def test_encode_query_and_document_forward_precision(encoder):
    assert encoder.encode_query(TEXTS, precision="ubinary", compute="float32").dtype == np.uint8
    assert encoder.encode_document(TEXTS, precision="binary").dtype == np.int8


@pytest.mark.parametrize("word", ["auto", "bfloat16", "float16"])
def test_old_compute_words_as_precision_name_compute_in_one_line(encoder, word):
    with pytest.raises(ValueError) as error:
        encoder.encode(TEXTS, precision=word)
    message = str(error.value)
    assert message.startswith(f"precision={word!r} names a compute path; use compute={word!r}")
    assert "float32, int8, uint8, binary, ubinary" in message and "\n" not in message
    with pytest.raises(ValueError, match=f"use compute={word!r}"):
        encoder.encode_query(TEXTS, precision=word)
