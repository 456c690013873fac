import json
import os
import pathlib
import subprocess

import numpy as np
import pytest

from conftest import tiny_encoder
from sbert_keras.evaluation import evaluators
from sbert_keras.evaluation import pair_evaluation
from sbert_keras.evaluation import retrieval_evaluation

ST_PYTHON = pathlib.Path("/work/peers/st/bin/python")


class FakeEncoder:
    """Maps each text to a fixed vector."""

    def __init__(self, vectors):
        self.vectors = {k: np.asarray(v, "float32") for k, v in vectors.items()}

    def encode(self, texts, batch_size=32):
        return np.stack([self.vectors[t] for t in texts]).astype("float32")


def unit(degrees):
    r = np.deg2rad(degrees)
    return [np.cos(r), np.sin(r)]


# Three queries and six documents on the unit circle: the ranking is by angle.
ANGLES = {"d0": 0, "d1": 20, "d2": 45, "d3": 70, "d4": 90, "d5": 200}
QUERIES = {"q1": "at 0", "q2": "at 90", "q3": "at 200", "q4": "at 10"}
CORPUS = {doc: f"doc {doc}" for doc in ANGLES}
# q1 ranks d0 d1 d2 d3 d4 d5 (hits at ranks 2, 4); q2 ranks d4 first (hit at 1);
# q3 ranks d5 d4 d3 d2 d0 d1 (hits at 4, 6); q4 has no relevant document: skipped.
RELEVANT = {"q1": {"d1", "d3"}, "q2": {"d4"}, "q3": {"d2", "d1"}, "q4": set()}


def hand_encoder():
    vectors = {text: unit(int(text.split()[1])) for text in QUERIES.values()}
    vectors.update({f"doc {doc}": unit(angle) for doc, angle in ANGLES.items()})
    return FakeEncoder(vectors)


def test_information_retrieval_hand_computed_values():
    out = retrieval_evaluation.information_retrieval_evaluation(hand_encoder(), QUERIES, CORPUS, RELEVANT)
    assert out.pop("primary") == "cosine_ndcg@10"
    d = 1 / np.log2(np.arange(2, 8))  # the discount of ranks 1..6
    expected = {
        "cosine_accuracy@1": 1 / 3,
        "cosine_accuracy@3": 2 / 3,
        "cosine_accuracy@5": 1.0,
        "cosine_accuracy@10": 1.0,
        "cosine_precision@1": 1 / 3,
        "cosine_precision@3": 2 / 9,
        "cosine_precision@5": 4 / 15,
        "cosine_precision@10": 1 / 6,
        "cosine_recall@1": 1 / 3,
        "cosine_recall@3": 1 / 2,
        "cosine_recall@5": 5 / 6,
        "cosine_recall@10": 1.0,
        "cosine_mrr@10": (1 / 2 + 1 + 1 / 4) / 3,
        "cosine_ndcg@10": ((d[1] + d[3]) / (d[0] + d[1]) + 1 + (d[3] + d[5]) / (d[0] + d[1])) / 3,
        "cosine_map@100": ((1 / 2 + 2 / 4) / 2 + 1 + (1 / 4 + 2 / 6) / 2) / 3,
    }
    assert set(out) == set(expected)
    for key, value in expected.items():
        assert out[key] == pytest.approx(value, abs=1e-9), key
    assert all(isinstance(v, float) for v in out.values())


def test_information_retrieval_other_cutoffs_and_depth():
    out = retrieval_evaluation.information_retrieval_evaluation(
        hand_encoder(),
        QUERIES,
        CORPUS,
        RELEVANT,
        accuracy_at_k=(2,),
        precision_recall_at_k=(2,),
        mrr_at_k=(3,),
        ndcg_at_k=(3, 1),
        map_at_k=(3,),
        corpus_chunk_size=2,
    )
    d = 1 / np.log2(np.arange(2, 8))
    assert out["primary"] == "cosine_ndcg@3"
    # q3's hits (ranks 4, 6) lie past k = 3; its ideal DCG still counts two documents.
    assert out["cosine_ndcg@3"] == pytest.approx((d[1] / (d[0] + d[1]) + 1 + 0) / 3)
    assert out["cosine_ndcg@1"] == pytest.approx(1 / 3)
    assert out["cosine_map@3"] == pytest.approx((1 / 2 / 2 + 1 + 0) / 3)
    assert out["cosine_mrr@3"] == pytest.approx((1 / 2 + 1) / 3)


def test_score_ties_rank_by_corpus_id():
    enc = FakeEncoder({"q": [1, 0], "same": [1, 0], "other": [0, 1]})
    # "b" and "a" hold the same text: the tie goes to the lower id, "a", as in ST.
    corpus = {"b": "same", "c": "other", "a": "same"}
    ks = dict(accuracy_at_k=(1,), precision_recall_at_k=(1,), mrr_at_k=(1,), ndcg_at_k=(1,), map_at_k=(1,))
    out = retrieval_evaluation.information_retrieval_evaluation(enc, {"q": "q"}, corpus, {"q": {"b"}}, **ks)
    assert out["cosine_accuracy@1"] == 0.0
    out = retrieval_evaluation.information_retrieval_evaluation(enc, {"q": "q"}, corpus, {"q": {"a"}}, **ks)
    assert out["cosine_accuracy@1"] == 1.0


def test_retrieval_metrics_checks_its_inputs():
    out = retrieval_evaluation.retrieval_metrics([[False, True, False]], [2], (1,), (2,), (3,), (3,), (3,))
    assert out["cosine_mrr@3"] == pytest.approx(0.5) and out["cosine_recall@2"] == pytest.approx(0.5)
    with pytest.raises(ValueError, match="largest k needs 10"):
        retrieval_evaluation.retrieval_metrics([[True, False]], [1])
    with pytest.raises(ValueError, match="num_relevant"):
        retrieval_evaluation.retrieval_metrics([[True, True, False]], [1], (1,), (1,), (1,), (1,), (1,))


@pytest.mark.parametrize(
    "queries, corpus, relevant, error, match",
    [
        (QUERIES, {}, RELEVANT, ValueError, "`corpus` is empty"),
        (QUERIES, CORPUS, {"q9": {"d1"}}, ValueError, "query id 'q9'"),
        (QUERIES, CORPUS, {"q1": {"d1", "d9"}}, ValueError, r"relevant\['q1'\]` names corpus id 'd9'"),
        (QUERIES, CORPUS, {"q4": set()}, ValueError, "No query"),
        (QUERIES, CORPUS, {"q1": "d1"}, TypeError, "not the string"),
        (QUERIES, CORPUS, [("q1", "d1")], TypeError, "`relevant` must be a dict"),
        ({"q1": None}, CORPUS, RELEVANT, TypeError, "`queries` item 0"),
    ],
)
def test_information_retrieval_bad_input_names_it(queries, corpus, relevant, error, match):
    with pytest.raises(error, match=match):
        retrieval_evaluation.information_retrieval_evaluation(hand_encoder(), queries, corpus, relevant)


def test_bad_cutoff_or_batch_size_is_named_before_encoding():
    with pytest.raises(ValueError, match="ndcg_at_k"):
        retrieval_evaluation.information_retrieval_evaluation(None, QUERIES, CORPUS, RELEVANT, ndcg_at_k=(0,))
    with pytest.raises(TypeError, match="batch_size"):
        retrieval_evaluation.information_retrieval_evaluation(None, QUERIES, CORPUS, RELEVANT, (1,))


def test_callback_logs_the_floats_but_not_the_primary_name():
    callback = evaluators.EvaluationCallback.of(
        retrieval_evaluation.information_retrieval_evaluation, hand_encoder(), QUERIES, CORPUS, RELEVANT
    )
    logs = {}
    callback.on_epoch_end(0, logs)
    assert "dev_primary" not in logs and logs["dev_cosine_ndcg@10"] == callback.results[0]["cosine_ndcg@10"]
    assert len(logs) == 15


def test_tiny_encoder_end_to_end():
    encoder = tiny_encoder()
    queries = {"q1": "a dog runs in the park", "q2": "a man is playing guitar"}
    corpus = {"d1": "the dog runs", "d2": "a man plays piano", "d3": "the cat sleeps on the sofa", "d4": "red car"}
    out = retrieval_evaluation.information_retrieval_evaluation(
        encoder, queries, corpus, {"q1": {"d1"}, "q2": {"d2", "d4"}}
    )
    assert out[out["primary"]] == out["cosine_ndcg@10"]
    assert all(0.0 <= v <= 1.0 for k, v in out.items() if k != "primary")
    assert out["cosine_recall@10"] == pytest.approx(1.0)  # the whole corpus is retrieved


# === Against sentence-transformers ===

ST_SCRIPT = r"""
import json, sys
import numpy as np, torch
from sentence_transformers import util
from sentence_transformers.evaluation import (
    BinaryClassificationEvaluator, InformationRetrievalEvaluator, ParaphraseMiningEvaluator)

data = json.load(open(sys.argv[1]))
vectors = {t: np.asarray(v, "float32") for t, v in data["vectors"].items()}

class Card:
    def set_evaluation_metrics(self, *args, **kwargs):
        pass

class Model:  # what the evaluators use of a SentenceTransformer
    similarity_fn_name = "cosine"
    model_card_data = Card()
    def similarity(self, a, b):
        return util.cos_sim(a, b)
    def encode(self, sentences, convert_to_tensor=False, **kwargs):
        out = np.stack([vectors[s] for s in sentences])
        return torch.from_numpy(out) if convert_to_tensor else out
    encode_query = encode_document = encode

model, out = Model(), {}
ir = InformationRetrievalEvaluator(data["queries"], data["corpus"],
                                   {q: set(d) for q, d in data["relevant"].items()}, write_csv=False)
out["ir"] = {**ir(model), "primary": ir.primary_metric}
bc = BinaryClassificationEvaluator(*data["binary"], similarity_fn_names=["cosine"], write_csv=False)
out["binary"] = {**bc(model), "primary": bc.primary_metric}
pm = ParaphraseMiningEvaluator(dict(enumerate(data["sentences"])), [tuple(p) for p in data["gold"]], write_csv=False)
out["paraphrase"] = {**pm(model), "primary": pm.primary_metric}
json.dump(out, open(sys.argv[2], "w"))
"""


def reference_data():
    """Random embeddings for an IR set, labelled pairs and paraphrase gold pairs."""
    rng = np.random.default_rng(0)
    vectors = {}

    def text(name, vector):
        vectors[name] = np.asarray(vector, "float32").tolist()
        return name

    topics = rng.normal(size=(12, 16))
    corpus = {f"d{i:02d}": text(f"doc {i}", topics[i % 12] + rng.normal(size=16)) for i in range(40)}
    queries = {f"q{i:02d}": text(f"query {i}", topics[i % 12] + rng.normal(size=16)) for i in range(16)}
    relevant = {
        f"q{i:02d}": sorted({f"d{j:02d}" for j in range(40) if j % 12 == i % 12 and rng.random() < 0.6})
        for i in range(14)  # q14 and q15 have none: skipped
    }
    relevant = {q: docs for q, docs in relevant.items() if docs}
    a = [text(f"a {i}", rng.normal(size=16)) for i in range(80)]
    labels = rng.integers(0, 2, size=80)
    b = [
        text(f"b {i}", np.asarray(vectors[a[i]]) * (1.5 if labels[i] else 0.3) + rng.normal(size=16)) for i in range(80)
    ]
    base = rng.normal(size=(20, 16))
    sentences = [text(f"s {i}", base[i % 20] + (i >= 20) * rng.normal(size=16) * 0.8) for i in range(35)]
    gold = [[i, i + 20] for i in range(15)] + [[0, 1], [2, 3]]
    return {
        "vectors": vectors,
        "queries": queries,
        "corpus": corpus,
        "relevant": relevant,
        "binary": [a, b, labels.tolist()],
        "sentences": sentences,
        "gold": gold,
    }


@pytest.fixture(scope="module")
def st_reference(tmp_path_factory):
    if not ST_PYTHON.exists():
        pytest.skip(f"sentence-transformers peer {ST_PYTHON} is absent")
    folder = tmp_path_factory.mktemp("st")
    data = reference_data()
    (folder / "data.json").write_text(json.dumps(data))
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "TOKENIZERS_PARALLELISM": "false"}
    env.pop("PYTHONPATH", None)
    result = subprocess.run(
        [str(ST_PYTHON), "-c", ST_SCRIPT, str(folder / "data.json"), str(folder / "out.json")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return data, json.loads((folder / "out.json").read_text())


def assert_same_metrics(ours, theirs):
    assert ours["primary"] == theirs.pop("primary")
    assert set(ours) - {"primary"} == set(theirs)
    for key, value in theirs.items():
        assert ours[key] == pytest.approx(value, abs=1e-6), key


def test_information_retrieval_matches_sentence_transformers(st_reference):
    data, st = st_reference
    encoder = FakeEncoder(data["vectors"])
    relevant = {q: set(docs) for q, docs in data["relevant"].items()}
    ours = retrieval_evaluation.information_retrieval_evaluation(encoder, data["queries"], data["corpus"], relevant)
    assert 0.2 < ours["cosine_ndcg@10"] < 0.95  # neither trivial nor hopeless
    assert_same_metrics(ours, st["ir"])


def test_pair_evaluators_match_sentence_transformers(st_reference):
    data, st = st_reference
    encoder = FakeEncoder(data["vectors"])
    ours = pair_evaluation.binary_classification_evaluation(encoder, *data["binary"])
    assert 0.6 < ours["cosine_accuracy"] < 1.0
    assert_same_metrics(ours, st["binary"])
    ours = pair_evaluation.paraphrase_mining_evaluation(encoder, data["sentences"], data["gold"])
    assert 0.5 < ours["recall"] < 1.0  # some gold pairs are not mined
    assert_same_metrics(ours, st["paraphrase"])


# === BEIR files ===


def write_beir(folder, qrels):
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text(
        '{"_id": "d1", "title": "Dogs", "text": "the dog runs"}\n{"_id": 2, "text": "a red car"}\n'
    )
    (folder / "queries.jsonl").write_text('{"_id": "q1", "text": "a dog runs"}\n{"_id": "q2", "text": "cars"}\n')
    (folder / "qrels" / "test.tsv").write_text(qrels)


def test_read_beir(tmp_path):
    write_beir(tmp_path, "query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\t2\t0.5\nq2\td1\t0\n")
    queries, corpus, relevant = retrieval_evaluation.read_beir(tmp_path)
    assert queries == {"q1": "a dog runs", "q2": "cars"}
    assert corpus == {"d1": "Dogs the dog runs", "2": "a red car"}
    assert relevant == {"q1": {"d1"}, "q2": {"2"}}  # a score of 0 is not relevant
    encoder = FakeEncoder({"a dog runs": [1, 0], "cars": [0, 1], "Dogs the dog runs": [1, 0.1], "a red car": [0, 1]})
    out = retrieval_evaluation.information_retrieval_evaluation(encoder, queries, corpus, relevant)
    assert out["cosine_accuracy@1"] == 1.0


@pytest.mark.parametrize(
    "qrels, match",
    [
        ("query-id\tcorpus-id\tscore\nq1\td9\t1\n", r"test.tsv, line 2: corpus id 'd9' is not in the corpus file"),
        ("q1\td1\n", r"test.tsv, line 1: expected query-id, corpus-id and score"),
        ("q1\td1\thigh\n", "score 'high' is not a number"),
        ("q7\td1\t1\n", "query id 'q7'"),
    ],
)
def test_read_beir_names_file_and_line(tmp_path, qrels, match):
    write_beir(tmp_path, qrels)
    with pytest.raises(ValueError, match=match):
        retrieval_evaluation.read_beir(tmp_path)


def test_read_beir_bad_json_line(tmp_path):
    write_beir(tmp_path, "q1\td1\t1\n")
    (tmp_path / "queries.jsonl").write_text('{"_id": "q1", "text": "a"}\n{"_id": "q2"}\n')
    with pytest.raises(ValueError, match=r"queries.jsonl, line 2: expected an object"):
        retrieval_evaluation.read_beir(tmp_path)
