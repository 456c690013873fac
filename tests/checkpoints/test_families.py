"""DistilBERT, MPNet and XLM-RoBERTa folders: parity with sentence-transformers, token ids, clear errors.

The references in `tests/fixtures/<family>/` are computed by
sentence-transformers 6.2 (`make fixtures` runs
`tests/fixtures/make_family_fixtures.py` in its own virtualenv); these
tests need neither it nor torch, and skip, saying so, where the folders
have not been generated. Each fixture folder is loaded as saved
(with its separate vocabulary file), with `tokenizer.json` alone, and with
CLS pooling.
"""

import json
import pathlib
import shutil
import warnings

import keras
import keras_hub
import numpy as np
import pytest

from checkpoints.test_presets import HARD_TEXTS
from conftest import family_fixture
from conftest import read_json
from conftest import shared_path
from sbert_keras import SentenceEncoder
from sbert_keras.checkpoints import sentencepiece_model
from sbert_keras.checkpoints.tokenizer_json import MPNetTokenizer
from sbert_keras.model.mpnet_backbone import MPNetBackbone
from sbert_keras.runtime import self_check
from sbert_keras.runtime.routes import xnnpack

# fixture -> (backbone class, tokenizer class, separate vocabulary file)
FAMILIES = {
    "distilbert-dense": (keras_hub.models.DistilBertBackbone, "LowercasingBertTokenizer", "vocab.txt"),
    "mpnet": (MPNetBackbone, "MPNetTokenizer", "vocab.txt"),
    "xlm-roberta": (
        keras_hub.models.XLMRobertaBackbone,
        "SpaceSplittingXLMRobertaTokenizer",
        "sentencepiece.bpe.model",
    ),
}
VARIANTS = ("as saved", "tokenizer.json only", "cls pooling")


def fixture_folder(name, variant, tmp_path):
    """The fixture's ST folder as saved, or a copy without its vocabulary file, or with CLS pooling."""
    source = family_fixture(name, "model")
    if variant == "as saved":
        return source
    folder = pathlib.Path(shutil.copytree(source, tmp_path / name))
    if variant == "tokenizer.json only":
        (folder / FAMILIES[name][2]).unlink()
    else:
        config = read_json(folder / "1_Pooling" / "config.json")
        (folder / "1_Pooling" / "config.json").write_text(json.dumps(config | {"pooling_mode": "cls"}))
    return folder


def reference(name, variant):
    return np.load(family_fixture(name, "embeddings-cls.npy" if variant == "cls pooling" else "embeddings.npy"))


def min_cosine(a, b):
    a, b = np.asarray(a, "float64"), np.asarray(b, "float64")
    return float(np.min(np.sum(a * b, 1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))))


def encode_all(encoder, texts):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the one truncated text
        return encoder.encode(texts, batch_size=32, show_progress=False, compute="float32")


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("name", list(FAMILIES))
def test_parity_with_sentence_transformers(tmp_path, name, variant):
    texts = read_json(shared_path("reference", "all-minilm-l6-v2", "texts.json"))
    encoder = SentenceEncoder.from_preset(fixture_folder(name, variant, tmp_path))
    backbone_class, tokenizer_class, _ = FAMILIES[name]
    assert type(encoder.backbone) is backbone_class
    assert type(encoder.preprocessor.tokenizer).__name__ == tokenizer_class
    assert encoder.pooling == ("cls" if variant == "cls pooling" else "mean")
    expected = reference(name, variant)
    got = encode_all(encoder, texts)
    assert got.shape == expected.shape
    assert np.abs(got - expected).max() <= 1e-5


def test_the_distilbert_dense_head_and_the_mpnet_normalisation_are_read():
    distilbert = SentenceEncoder.from_preset(family_fixture("distilbert-dense", "model"))
    assert [layer.units for layer in distilbert.projections] == [16] and not distilbert.normalize
    assert distilbert.projections[0].activation.__name__ == "tanh"
    mpnet = SentenceEncoder.from_preset(family_fixture("mpnet", "model"))
    assert mpnet.normalize and not mpnet.projections and mpnet.sequence_length == 128


def test_distilbert_without_its_dense_head_matches_sentence_transformers(tmp_path):
    folder = pathlib.Path(shutil.copytree(family_fixture("distilbert-dense", "model"), tmp_path / "distilbert"))
    modules = [module for module in read_json(folder / "modules.json") if not module["type"].endswith("Dense")]
    (folder / "modules.json").write_text(json.dumps(modules))
    shutil.rmtree(folder / "2_Dense")
    encoder = SentenceEncoder.from_preset(folder)
    assert not encoder.projections and encoder.embedding_dim == 32
    texts = read_json(shared_path("reference", "all-minilm-l6-v2", "texts.json"))
    expected = np.load(family_fixture("distilbert-dense", "embeddings-no-dense.npy"))
    assert np.abs(encode_all(encoder, texts) - expected).max() <= 1e-5


@pytest.mark.parametrize("variant", VARIANTS[:2])
@pytest.mark.parametrize("name", list(FAMILIES))
def test_token_ids_match_the_checkpoint_tokenizer(tmp_path, name, variant):
    tokenizers = pytest.importorskip("tokenizers")
    texts = read_json(shared_path("reference", "all-minilm-l6-v2", "texts.json"))[290:] + HARD_TEXTS
    folder = fixture_folder(name, variant, tmp_path)
    expected = tokenizers.Tokenizer.from_file(str(family_fixture(name, "model", "tokenizer.json")))
    expected.no_padding()
    expected.no_truncation()
    encoder = SentenceEncoder.from_preset(folder, sequence_length=128)
    ids, _ = encoder.preprocessor.tokenize(texts)
    assert [row[:127] + row[-1:] for row in ids.to_list()] == [
        (e.ids[:127] + e.ids[-1:]) for e in expected.encode_batch(texts)
    ]


def test_mpnet_relative_buckets_other_than_32_are_refused(tmp_path):
    folder = pathlib.Path(shutil.copytree(family_fixture("mpnet", "model"), tmp_path / "mpnet"))
    config = read_json(folder / "config.json")
    (folder / "config.json").write_text(json.dumps(config | {"relative_attention_num_buckets": 64}))
    with pytest.raises(ValueError, match=r"config\.json: relative_attention_num_buckets=64 is not supported"):
        SentenceEncoder.from_preset(folder)


def test_a_distilbert_weight_that_disagrees_with_the_config_is_named(tmp_path):
    folder = pathlib.Path(shutil.copytree(family_fixture("distilbert-dense", "model"), tmp_path / "distilbert"))
    config = read_json(folder / "config.json")
    (folder / "config.json").write_text(json.dumps(config | {"hidden_dim": 128}))
    with pytest.raises(ValueError, match=r"tensor 'transformer\.layer\.0\.ffn\.lin1\.weight' has shape \[64, 32\]"):
        SentenceEncoder.from_preset(folder)
    (folder / "config.json").write_text(json.dumps(config | {"n_layers": 1}))
    with pytest.raises(ValueError, match=r"holds 2 transformer layers; .*n_layers=1"):
        SentenceEncoder.from_preset(folder)


def test_a_sentencepiece_normalizer_it_cannot_reproduce_is_named(tmp_path):
    folder = pathlib.Path(shutil.copytree(family_fixture("xlm-roberta", "model"), tmp_path / "xlmr"))
    (folder / "sentencepiece.bpe.model").unlink()
    tokenizer = read_json(folder / "tokenizer.json")
    tokenizer["normalizer"] = {"type": "Sequence", "normalizers": [tokenizer["normalizer"], {"type": "Lowercase"}]}
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer))
    with pytest.raises(ValueError, match=r"tokenizer\.json: normalizer 'Lowercase' is not supported"):
        SentenceEncoder.from_preset(folder)


def test_a_sentencepiece_model_round_trips_through_the_codec():
    proto = family_fixture("xlm-roberta", "model", "sentencepiece.bpe.model").read_bytes()
    model = sentencepiece_model.parse_model(proto)
    assert [p for p, _, _ in model["pieces"][:3]] == ["<unk>", "<s>", "</s>"]
    assert model["precompiled_charsmap"] and model["add_dummy_prefix"]
    rebuilt = sentencepiece_model.build_model(model["pieces"], model["precompiled_charsmap"])
    again = sentencepiece_model.parse_model(rebuilt)
    assert again["pieces"] == model["pieces"] and again["precompiled_charsmap"] == model["precompiled_charsmap"]
    original = keras_hub.models.XLMRobertaTokenizer(proto=proto)
    copy = keras_hub.models.XLMRobertaTokenizer(proto=rebuilt)
    texts = HARD_TEXTS + ["  two  spaces ", "東京は日本の首都です。"]
    assert copy(texts) == original(texts)
    with pytest.raises(ValueError, match="not a readable SentencePiece model"):
        sentencepiece_model.parse_model(b"\x0a\xff")


def test_the_mpnet_tokenizer_packs_its_own_special_tokens_and_serializes():
    vocab = ["<s>", "<pad>", "</s>", "<unk>", "[UNK]", "straße", "groß", "<mask>"]
    tokenizer = MPNetTokenizer(vocabulary=vocab, lowercase=True)
    assert (tokenizer.start_token_id, tokenizer.end_token_id, tokenizer.pad_token_id) == (0, 2, 1)
    assert tokenizer.tokenize(["Straße GROß zzz"]) == [[5, 6, 4]]
    clone = keras.layers.deserialize(keras.layers.serialize(tokenizer))
    assert type(clone) is MPNetTokenizer and clone.lowercase_like_python and clone.oov_token == "[UNK]"


@pytest.mark.parametrize("name", list(FAMILIES))
def test_every_family_takes_the_fast_routes_it_declares_within_their_gates(name, monkeypatch):
    # No silent fallback to the plain Keras graph: float32 and bf16 batches run
    # the fused graph, two batches a call (MPNet's relative bias included), or XNNPACK's float32 on
    # an AVX2-only CPU; int8 runs XNNPACK where the CPU has VNNI/AMX or AVX2 only;
    # one text in float32 runs XNNPACK's float32 where the CPU has AVX2 and FMA
    # (with AVX-512 once `warmup()` built it), else the XLA query; and each
    # passes its gate against the Keras graph.
    monkeypatch.delenv(xnnpack.DISABLE_ENV, raising=False)  # off for the rest of the suite (conftest)
    encoder = SentenceEncoder.from_preset(family_fixture(name, "model"))
    engine = encoder.engine
    xnnpack_float32 = xnnpack.available(engine.host, "float32")
    routes = {"float32": "xnnpack_float32" if xnnpack_float32 and engine.host.avx2_only else "fused"}
    if engine.host.bf16:
        routes["bfloat16"] = "fused"
    if xnnpack.available(engine.host):
        routes["int8"] = "xnnpack"
    texts = HARD_TEXTS[:6] + ["a dog", "two dogs run through the snow on a cold winter morning"]
    reference, _, _ = engine.routes["keras"].build("float32").query(texts)
    for compute, route in routes.items():
        with warnings.catch_warnings():
            warnings.simplefilter("error", UserWarning)  # a failed self-check warns
            got = encoder.encode(texts, batch_size=4, compute=compute, normalize=False, show_progress=False)
        assert engine.route(compute) == (route, compute)
        assert route != "fused" or engine.verdicts.get("fused_groups", compute) is True  # two batches a call
        gate = 0.99999 if compute == "float32" else self_check.MIN_COSINE[compute]
        assert min_cosine(got, reference) >= gate, compute
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        encoder.warmup("float32", verbose=False)  # with AVX-512, a call leaves XNNPACK's float32 to it
        one = encoder.encode(texts[-1], compute="float32", normalize=False)
    assert engine.select("float32", "one")[0].name == ("xnnpack_float32" if xnnpack_float32 else "xla")
    np.testing.assert_allclose(one, reference[-1], atol=2e-5)
