"""sentence-transformers 6.2 and transformers 5 load what `save_to_sentence_transformers` writes.

These tests run the peers in a subprocess of a separate virtualenv (never
a dependency of the project), named by the environment variable
`SBERT_PEER_PYTHON`; without it they skip, saying how to create it. For
each family (and for encoders after a short `fit`), the saved folder must
give, in sentence-transformers, the vectors of `encode(precision="float32")`
within 1e-5, load in `transformers.AutoModel` without missing, unexpected or
mismatched weights, and tokenise with `AutoTokenizer` to the Keras ids. The
fixture script, run again, must give the folders `make fixtures` generated:
the same tokenizer and configuration files, weights and references.
"""

import os
import pathlib
import subprocess

import numpy as np
import pytest
import safetensors.numpy

from checkpoints.test_st_writer import SOURCES
from checkpoints.test_st_writer import fitted
from checkpoints.test_st_writer import source
from conftest import FIXTURES
from conftest import ROOT
from conftest import family_fixture
from conftest import minilm_path
from conftest import read_json
from conftest import shared_path
from sbert_keras import SentenceEncoder

PEER_ENV = "SBERT_PEER_PYTHON"
HOW_TO_CREATE = (
    f"set {PEER_ENV} to the python of the virtualenv with the peer libraries of requirements-peer.txt "
    f"(sentence-transformers==6.2.0, torch==2.13.0): make install-peer && export {PEER_ENV}=$PWD/.venv-peer/bin/python"
)
CHECK_SCRIPT = ROOT / "tests" / "peer" / "sentence_transformers_check.py"
CASES = [*SOURCES, "distilbert-dense after fit", "mpnet after fit"]


def peer_python():
    python = os.environ.get(PEER_ENV)
    if not python:
        pytest.skip(f"no peer virtualenv: {HOW_TO_CREATE}")
    if not os.access(python, os.X_OK):
        pytest.skip(f"{PEER_ENV}={python} is not an executable python: {HOW_TO_CREATE}")
    return python


def run_peer(args, timeout=900):
    done = subprocess.run([peer_python(), *map(str, args)], capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.fixture(scope="module")
def peer_results(tmp_path_factory):
    """`{case: (keras vectors, keras ids, st vectors, report)}` for every case, one peer process."""
    peer_python()
    root = tmp_path_factory.mktemp("peer")
    texts = read_json(shared_path("reference", "all-minilm-l6-v2", "texts.json"))
    keras_side, pairs = {}, []
    for case in CASES:
        name = case.split(" ")[0]
        encoder = SentenceEncoder.from_preset(source(name))
        if case.endswith("after fit"):
            fitted(encoder)
        folder = encoder.save_to_sentence_transformers(root / case.replace(" ", "-"))
        with pytest.warns(UserWarning, match="truncated"):
            vectors = encoder.encode(texts, batch_size=32, show_progress=False, compute="float32")
        ids, _ = encoder.preprocessor.tokenize(texts)
        keras_side[case] = (vectors, ids.to_list(), encoder.sequence_length)
        pairs += [folder, root / (case.replace(" ", "-") + "-out")]
    run_peer([CHECK_SCRIPT, shared_path("reference", "all-minilm-l6-v2", "texts.json"), *pairs])
    return {
        case: (
            *keras_side[case],
            np.load(pathlib.Path(out) / "embeddings.npy"),
            read_json(pathlib.Path(out) / "report.json"),
        )
        for case, out in zip(CASES, pairs[1::2])
    }


@pytest.mark.parametrize("case", CASES)
def test_sentence_transformers_reproduces_the_saved_encoder(peer_results, case):
    vectors, ids, length, st_vectors, report = peer_results[case]
    assert st_vectors.shape == vectors.shape
    assert np.abs(st_vectors - vectors).max() <= 1e-5
    assert report["max_seq_length"] == length and report["similarity_fn_name"] == "cosine"


@pytest.mark.parametrize("case", CASES)
def test_transformers_loads_every_weight_and_the_tokenizer(peer_results, case):
    _, ids, length, _, report = peer_results[case]
    assert (report["missing_keys"], report["unexpected_keys"], report["mismatched_keys"]) == ([], [], [])
    # Texts that fit are tokenised alike (the Keras side cuts the long one at the maximum length).
    fitting = [i for i, row in enumerate(report["ids"]) if len(row) <= length]
    assert len(fitting) >= len(ids) - 1
    assert [report["ids"][i] for i in fitting] == [ids[i] for i in fitting]


def test_sentence_transformers_reproduces_saved_minilm(tmp_path):
    python = peer_python()
    texts_path = shared_path("reference", "all-minilm-l6-v2", "texts.json")
    encoder = SentenceEncoder.from_preset(minilm_path())
    folder = encoder.save_to_sentence_transformers(tmp_path / "minilm")
    done = subprocess.run([python, CHECK_SCRIPT, texts_path, folder, tmp_path / "out"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    reference = np.load(shared_path("reference", "all-minilm-l6-v2", "embeddings.npy"))
    assert np.abs(np.load(tmp_path / "out" / "embeddings.npy") - reference).max() <= 1e-5
    report = read_json(tmp_path / "out" / "report.json")
    assert (report["missing_keys"], report["unexpected_keys"]) == ([], [])


def fixture_differences(built, generated):
    """What differs between two runs of the fixture script: file names, bytes, or floats beyond 1e-6."""
    names = {path.relative_to(built) for path in built.rglob("*") if path.is_file()}
    found = sorted(map(str, names ^ {path.relative_to(generated) for path in generated.rglob("*") if path.is_file()}))
    for name in sorted(names):
        a, b = built / name, generated / name
        if not b.is_file():
            continue
        if name.suffix in (".npy", ".safetensors"):
            first, second = (
                {"": np.load(f)} if name.suffix == ".npy" else safetensors.numpy.load_file(f) for f in (a, b)
            )
            same = first.keys() == second.keys() and all(
                first[k].shape == second[k].shape and np.allclose(first[k], second[k], rtol=0, atol=1e-6) for k in first
            )
        else:
            same = a.read_bytes() == b.read_bytes()
        if not same:
            found.append(str(name))
    return found


def test_the_fixture_script_rebuilds_the_generated_fixtures(tmp_path):
    families = ("distilbert-dense", "mpnet", "xlm-roberta")
    for family in families:
        family_fixture(family)
    run_peer([FIXTURES / "make_family_fixtures.py", "--output", tmp_path])
    for family in families:
        assert fixture_differences(tmp_path / family, FIXTURES / family) == [], family


def test_fixture_differences_name_changed_files_and_ignore_float_round_off(tmp_path):
    for run, shift, text in ((tmp_path / "a", 0.0, "x"), (tmp_path / "b", 1e-7, "x")):
        (run / "model").mkdir(parents=True)
        np.save(run / "embeddings.npy", np.linspace(0, 1, 6, dtype="float32") + shift)
        (run / "model" / "vocab.txt").write_text(text)
    assert fixture_differences(tmp_path / "a", tmp_path / "b") == []
    (tmp_path / "b" / "model" / "vocab.txt").write_text("y")
    np.save(tmp_path / "b" / "embeddings.npy", np.zeros(6, "float32"))
    (tmp_path / "b" / "meta.json").write_text("{}")
    assert fixture_differences(tmp_path / "a", tmp_path / "b") == ["meta.json", "embeddings.npy", "model/vocab.txt"]


def test_the_skip_message_says_how_to_create_the_peer_virtualenv(monkeypatch):
    monkeypatch.delenv(PEER_ENV, raising=False)
    with pytest.raises(pytest.skip.Exception, match=r"sentence-transformers==6\.2\.0.*make install-peer"):
        peer_python()
