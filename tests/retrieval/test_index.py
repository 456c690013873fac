"""Tests of `sbert_keras.retrieval.index`: recall against exact search, save/load, ids, quantization, errors."""

import argparse
import json
import os
import re
import sys

import numpy as np
import pytest

faiss = pytest.importorskip("faiss")

from conftest import ROOT  # noqa: E402
from harness import run_cli_on_small_disk  # noqa: E402
from harness import small_disk_available  # noqa: E402
from sbert_keras.cli import index_commands  # noqa: E402
from sbert_keras.data import embedding_shards  # noqa: E402
from sbert_keras.retrieval import index_files  # noqa: E402
from sbert_keras.retrieval.index import DEFAULTS  # noqa: E402
from sbert_keras.retrieval.index import EmbeddingIndex  # noqa: E402
from sbert_keras.retrieval.index import read_parquet_embeddings  # noqa: E402
from sbert_keras.retrieval.semantic_search import semantic_search  # noqa: E402
from sbert_keras.utils import atomic_io  # noqa: E402
from sbert_keras.utils import disk_space  # noqa: E402
from sbert_keras.utils.checksums import file_sha256  # noqa: E402

DIM = 32


def random_unit(n, dim=DIM, seed=0):
    x = np.random.default_rng(seed).normal(size=(n, dim)).astype("float32")
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def clustered(n, dim=DIM, seed=0, centres=50):
    """Unit vectors around `centres` random directions: neighbours that mean something, like real embeddings."""
    rng = np.random.default_rng(seed)
    x = random_unit(centres, dim, seed + 1)[rng.integers(centres, size=n)] + 0.3 * random_unit(n, dim, seed + 2)
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype("float32")


@pytest.fixture(scope="module")
def corpus():
    return random_unit(2000)


@pytest.fixture(scope="module")
def queries():
    return random_unit(100, seed=1)


def exact_rows(queries, corpus, k):
    return np.array([[h["corpus_id"] for h in hits] for hits in semantic_search(queries, corpus, top_k=k)])


def recall(rows, truth):
    return np.mean([len(set(a) & set(b)) / len(b) for a, b in zip(rows.tolist(), truth.tolist())])


def test_flat_matches_semantic_search(corpus, queries):
    index = EmbeddingIndex.build(corpus, kind="flat")
    rows, scores = index.search_rows(queries, 10)
    truth = semantic_search(queries, corpus, top_k=10)
    assert recall(rows, exact_rows(queries, corpus, 10)) == 1.0
    np.testing.assert_allclose(scores, [[h["score"] for h in hits] for hits in truth], atol=1e-5)
    # `hits` has semantic_search's format (plus the string id), for `semantic_search(..., index=...)`.
    hits = index.hits(queries, 10)
    assert [[h["corpus_id"] for h in row] for row in hits] == [[h["corpus_id"] for h in row] for row in truth]
    assert hits[0][0]["id"] == str(hits[0][0]["corpus_id"])
    np.testing.assert_allclose([h["score"] for h in hits[3]], [h["score"] for h in truth[3]], atol=1e-5)
    assert index.hits(np.zeros((0, DIM), "float32"), 10) == []


@pytest.mark.parametrize("kind", ["hnsw", "ivf"])
def test_float_ann_recall_at_least_095(corpus, queries, kind):
    params = {"nprobe": 32} if kind == "ivf" else {}
    index = EmbeddingIndex.build(corpus, kind=kind, **params)
    rows, scores = index.search_rows(queries, 10)
    assert recall(rows, exact_rows(queries, corpus, 10)) >= 0.95
    assert np.all(np.diff(scores, axis=1) <= 1e-6)  # best first


def test_cosine_normalises_inside(corpus, queries):
    scaled = corpus * np.random.default_rng(3).uniform(0.1, 10, size=(len(corpus), 1)).astype("float32")
    rows, scores = EmbeddingIndex.build(scaled, kind="flat").search_rows(queries * 7, 5)
    assert np.array_equal(rows, exact_rows(queries, corpus, 5))
    assert scores.max() <= 1 + 1e-5


def test_string_ids_preserved_and_save_load_round_trip(tmp_path, corpus, queries):
    ids = [f"doc-{i}/é" for i in range(len(corpus))]
    for kind in index_files.KINDS:
        index = EmbeddingIndex.build(corpus, ids=ids, kind=kind)
        found, scores = index.search(queries, 7)
        rows, _ = index.search_rows(queries, 7)
        assert found.tolist() == [[ids[r] for r in row] for row in rows.tolist()]
        path = index.save(str(tmp_path / kind))
        loaded = EmbeddingIndex.load(path)
        found2, scores2 = loaded.search(queries, 7)
        assert found2.tolist() == found.tolist()
        np.testing.assert_allclose(scores2, scores, atol=1e-6)
        assert loaded.kind == kind and len(loaded) == len(corpus) and loaded.dim == DIM
        if kind == "binary":  # the rescoring vectors stay on disk
            assert isinstance(loaded.vectors, np.memmap)


def test_default_ids_are_row_numbers(corpus):
    ids, _ = EmbeddingIndex.build(corpus[:50], kind="flat").search(corpus[7], 1)
    assert ids.tolist() == [["7"]]


# Measured here: int8 0.98 -> 1.0, binary (32 sign bits) 0.12 -> 0.47 with 8x candidates.
@pytest.mark.parametrize("kind,minimum,gain", [("int8", 0.99, 0.005), ("binary", 0.4, 0.2)])
def test_quantized_recall_and_rescoring_improves_it(kind, minimum, gain):
    data = clustered(2000)
    queries = clustered(100, seed=5)
    truth = exact_rows(queries, data, 10)
    plain = recall(EmbeddingIndex.build(data, kind=kind, rescore_multiplier=1).search_rows(queries, 10)[0], truth)
    index = EmbeddingIndex.build(data, kind=kind, rescore_multiplier=8)
    rows, scores = index.search_rows(queries, 10)
    rescored = recall(rows, truth)
    assert rescored >= minimum
    assert rescored >= plain + gain
    # Rescored scores are the float cosines of the returned rows.
    np.testing.assert_allclose(scores, np.einsum("qd,qkd->qk", queries, data[rows]), atol=1e-5)
    assert index.nbytes() < EmbeddingIndex.build(data, kind="flat").nbytes()
    assert EmbeddingIndex.build(data[:100], kind=kind).params["rescore_multiplier"] == (10 if kind == "binary" else 4)


def test_top_k_larger_than_corpus_returns_all(corpus):
    for kind in index_files.KINDS:
        ids, scores = EmbeddingIndex.build(corpus[:60], kind=kind).search(corpus[:2], 100)
        assert ids.shape == scores.shape == (2, 60)
        assert sorted(ids[0].tolist()) == sorted(str(i) for i in range(60))


def test_bad_input_names_the_argument(corpus):
    with pytest.raises(ValueError, match="`embeddings` is empty"):
        EmbeddingIndex.build(np.zeros((0, DIM), "float32"))
    with pytest.raises(ValueError, match="`kind`"):
        EmbeddingIndex.build(corpus, kind="lsh")
    with pytest.raises(ValueError, match="`ids`"):
        EmbeddingIndex.build(corpus[:3], ids=["a", "b"])
    with pytest.raises(ValueError, match="`ids` must be distinct; 'a'"):
        EmbeddingIndex.build(corpus[:3], ids=["a", "b", "a"])
    with pytest.raises(ValueError, match="ef_serch"):
        EmbeddingIndex.build(corpus[:3], ef_serch=3)
    with pytest.raises(ValueError, match="`embeddings` row 1 contains NaN"):
        EmbeddingIndex.build(np.array([[1, 0], [np.nan, 0]], "float32"))
    index = EmbeddingIndex.build(corpus[:100], kind="flat")
    with pytest.raises(ValueError, match="`queries` has dimension 8, the index has 32"):
        index.search(np.ones((2, 8), "float32"))
    for top_k in (0, -1):
        with pytest.raises(ValueError, match="`top_k`"):
            index.search(corpus[:1], top_k)


def test_absent_incomplete_or_corrupt_index_dir(tmp_path, corpus):
    with pytest.raises(ValueError, match="absent"):
        EmbeddingIndex.load(str(tmp_path / "missing"))
    path = EmbeddingIndex.build(corpus[:100], kind="hnsw").save(str(tmp_path / "idx"))
    with open(os.path.join(path, "index.faiss"), "r+b") as f:
        f.truncate(200)
    with pytest.raises(ValueError, match=f"{path} is corrupt"):
        EmbeddingIndex.load(path)
    os.remove(os.path.join(path, "complete.json"))
    with pytest.raises(ValueError, match=f"{path} has no complete.json"):
        EmbeddingIndex.load(path)
    path = EmbeddingIndex.build(corpus[:100], kind="int8").save(str(tmp_path / "idx8"))
    np.save(os.path.join(path, "vectors.npy"), corpus[:10])
    with pytest.raises(ValueError, match="corrupt: vectors.npy does not match the sha256"):
        EmbeddingIndex.load(path)
    config = json.loads(open(os.path.join(path, "config.json")).read())  # a checksum that agrees
    config["sha256"]["vectors.npy"] = file_sha256(os.path.join(path, "vectors.npy"))
    atomic_io.write_json(os.path.join(path, "config.json"), config)
    with pytest.raises(ValueError, match="inconsistent"):
        EmbeddingIndex.load(path)


@pytest.mark.parametrize("kind", ["flat", "hnsw", "binary"])
def test_index_file_overwritten_after_saving_is_refused_naming_it(tmp_path, corpus, queries, kind):
    path = EmbeddingIndex.build(corpus[:500], kind=kind).save(str(tmp_path / "idx"))
    file = os.path.join(path, "index.faiss")
    size = os.path.getsize(file)
    with open(file, "r+b") as f:  # the second half overwritten: floats of 3.4e38
        f.seek(size // 2)
        f.write(b"\x7f" * (size - size // 2))
    with pytest.raises(ValueError, match=f"{path} is corrupt: index.faiss does not match the sha256"):
        EmbeddingIndex.load(path)
    config = json.loads(open(os.path.join(path, "config.json")).read())
    del config["sha256"]
    atomic_io.write_json(os.path.join(path, "config.json"), config)
    with pytest.raises(ValueError, match="records no sha256 of index.faiss, ids.npy"):
        EmbeddingIndex.load(path)


def test_scores_outside_the_cosine_range_are_refused(tmp_path, corpus, queries):
    # An index whose rows are not unit vectors (damaged before its checksum was taken).
    raw = faiss.IndexFlatIP(DIM)
    raw.add(corpus[:100] * 1e6)
    params = {**DEFAULTS, "dim": DIM, "rescore_multiplier": 4, "nlist": 1}
    broken = EmbeddingIndex(raw, np.arange(100).astype(str), "flat", params)
    with pytest.raises(ValueError, match="outside the cosine range"):
        broken.search(queries, 5)
    path = broken.save(str(tmp_path / "idx"))
    with pytest.raises(ValueError, match=f"index path {path}: the index returned the score .* outside the cosine"):
        EmbeddingIndex.load(path)
    # A sound index: every score of every kind is a cosine.
    for kind in index_files.KINDS:
        _, scores = EmbeddingIndex.build(corpus, kind=kind).search(queries, 10)
        assert np.all(np.abs(scores) <= 1 + 1e-5)


def test_save_refuses_to_replace_without_overwrite(tmp_path, corpus):
    index = EmbeddingIndex.build(corpus[:100], kind="flat")
    path = index.save(str(tmp_path / "idx"))
    with pytest.raises(ValueError, match="already holds an index"):
        index.save(path)
    index.save(path, overwrite=True)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("keep")
    with pytest.raises(ValueError, match="not an index"):
        index.save(str(tmp_path / "other"), overwrite=True)
    assert not os.path.exists(path + ".partial")


def write_shards(folder, ids, embeddings, shards=2):
    """An `embed-corpus` output folder: Parquet shards (`id`, `embedding`) and the completion marker."""
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    folder.mkdir()
    names = [f"part-{s:05d}-of-{shards:05d}.parquet" for s in range(shards)]
    for name, part in zip(names, np.array_split(np.arange(len(ids)), shards)):
        dim = embeddings.shape[1]
        column = pa.FixedSizeListArray.from_arrays(pa.array(embeddings[part].ravel(), pa.float32()), dim)
        pq.write_table(pa.table({"id": [ids[i] for i in part], "embedding": column}), folder / name)
    marker = {"complete": True, "dim": DIM, "texts": len(ids), "shards": names}
    marker["sha256"] = embedding_shards.shard_checksums(str(folder), names)
    atomic_io.write_json(str(folder / atomic_io.MARKER), marker)


def test_from_parquet_shards_and_cli_build(tmp_path, corpus):
    ids = [f"line-{i}" for i in range(300)]
    write_shards(tmp_path / "emb", ids, corpus[:300])
    index = EmbeddingIndex.from_parquet(str(tmp_path / "emb"), kind="flat")
    assert index.search(corpus[42], 1)[0].tolist() == [["line-42"]]
    parser = argparse.ArgumentParser()
    index_commands.add_arguments(parser)
    args = parser.parse_args(["build", "--embeddings", str(tmp_path / "emb"), "--output", str(tmp_path / "out")])
    summary = index_commands.run_build(args)
    assert summary["count"] == 300 and summary["dim"] == DIM and summary["kind"] == "hnsw"
    assert EmbeddingIndex.load(str(tmp_path / "out")).search(corpus[42], 1)[0].tolist() == [["line-42"]]
    (tmp_path / "unfinished").mkdir()
    with pytest.raises(atomic_io.IncompleteOutputError, match="incomplete run"):
        read_parquet_embeddings(str(tmp_path / "unfinished"))
    np.save(tmp_path / "emb.npy", corpus[:50])  # `sbert-keras encode` output: row r is line r + 1 of its input
    args = parser.parse_args(["build", "--embeddings", str(tmp_path / "emb.npy"), "--output", str(tmp_path / "o2")])
    assert index_commands.run_build(args)["count"] == 50
    assert EmbeddingIndex.load(str(tmp_path / "o2")).search(corpus[7], 1)[0].tolist() == [["8"]]


def test_from_parquet_needs_no_apache_beam(tmp_path, corpus, monkeypatch):
    ids = [f"line-{i}" for i in range(20)]
    write_shards(tmp_path / "emb", ids, corpus[:20], shards=2)
    # As if apache-beam were not installed: importing it (or the Beam integration) now fails.
    monkeypatch.setitem(sys.modules, "apache_beam", None)
    monkeypatch.setitem(sys.modules, "sbert_keras.integrations.beam", None)
    index = EmbeddingIndex.from_parquet(str(tmp_path / "emb"), kind="flat")
    assert index.search(corpus[7], 1)[0].tolist() == [["line-7"]]


def test_cli_search_prints_hits_per_query(tmp_path, corpus):
    ids = [f"doc{i}" for i in range(200)]
    EmbeddingIndex.build(corpus[:200], ids=ids).save(str(tmp_path / "idx"))

    class Encoder:  # stands in for the model: a "text" is a row number
        def encode(self, texts, batch_size=32):
            return corpus[[int(t) for t in texts]]

    parser = argparse.ArgumentParser()
    index_commands.add_arguments(parser)
    argv = ["search", "--index", str(tmp_path / "idx"), "--model", "m", "--query", "5", "--query", "9", "--top-k", "2"]
    lines = index_commands.run_search(parser.parse_args(argv), lambda spec: (Encoder(), None))
    assert [line["query"] for line in lines] == ["5", "9"]
    assert [line["hits"][0]["id"] for line in lines] == ["doc5", "doc9"]
    assert len(lines[0]["hits"]) == 2 and lines[0]["hits"][0]["score"] == pytest.approx(1.0, abs=1e-5)
    with pytest.raises(SystemExit):  # a usage error: argument --top-k: must be an integer >= 1
        parser.parse_args(argv[:-1] + ["0"])


def test_missing_or_short_shard_is_an_error_naming_it_and_the_row_counts(tmp_path, corpus):
    pq = pytest.importorskip("pyarrow.parquet")
    write_shards(tmp_path / "emb", [f"line-{i}" for i in range(300)], corpus[:300])
    second = tmp_path / "emb" / "part-00001-of-00002.parquet"
    kept = pq.read_table(second)
    os.remove(second)
    expected = r"part-00001-of-00002\.parquet listed in complete\.json are missing; .* 300 rows, .* hold 150"
    with pytest.raises(ValueError, match=expected):
        EmbeddingIndex.from_parquet(str(tmp_path / "emb"), kind="flat")
    parser = argparse.ArgumentParser()
    index_commands.add_arguments(parser)
    args = parser.parse_args(["build", "--embeddings", str(tmp_path / "emb"), "--output", str(tmp_path / "out")])
    with pytest.raises(ValueError, match=expected):
        index_commands.run_build(args)
    assert not (tmp_path / "out").exists() and not (tmp_path / "out.partial").exists()
    pq.write_table(kept.slice(0, 10), second)  # a shard with fewer rows than written
    with pytest.raises(ValueError, match="records 300 rows, the listed shards hold 160"):
        EmbeddingIndex.from_parquet(str(tmp_path / "emb"), kind="flat")
    pq.write_table(kept, tmp_path / "emb" / "part-00002-of-00003.parquet")
    with pytest.raises(ValueError, match=r"part-00002-of-00003\.parquet are not listed in complete\.json"):
        EmbeddingIndex.from_parquet(str(tmp_path / "emb"), kind="flat")
    atomic_io.write_json(str(tmp_path / "emb" / "complete.json"), {"complete": True, "dim": DIM})
    with pytest.raises(ValueError, match="records no shard list, row count"):
        EmbeddingIndex.from_parquet(str(tmp_path / "emb"), kind="flat")


def test_shard_of_another_dimension_names_the_file_and_both_dimensions(tmp_path, corpus):
    write_shards(tmp_path / "emb", [f"line-{i}" for i in range(300)], corpus[:300])
    write_shards(tmp_path / "other", [f"line-{i}" for i in range(300)], random_unit(300, dim=16))
    os.replace(tmp_path / "other" / "part-00001-of-00002.parquet", tmp_path / "emb" / "part-00001-of-00002.parquet")
    expected = r"shard \S*emb/part-00001-of-00002\.parquet holds embeddings of dimension 16 .* has dimension 32"
    with pytest.raises(ValueError, match=expected):
        EmbeddingIndex.from_parquet(str(tmp_path / "emb"), kind="flat")
    (tmp_path / "emb" / "part-00001-of-00002.parquet").write_bytes(b"not parquet")
    with pytest.raises(ValueError, match=r"shard \S*part-00001-of-00002\.parquet is unreadable"):
        EmbeddingIndex.from_parquet(str(tmp_path / "emb"), kind="flat")


def assert_one_line_disk_full(done, left, target):
    """The command failed with one error line naming `target` and left nothing on the disk."""
    last = done.stderr.strip().splitlines()[-1]
    assert done.returncode == 2, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert re.fullmatch(rf"sbert-keras \S+: error: not enough disk space for {target}: .*", last), last
    assert left == [], left


@pytest.mark.parametrize("fill", [False, True], ids=["checked-first", "met-while-writing"])
def test_disk_full_during_index_build_is_one_line_and_leaves_nothing(tmp_path, fill):
    if not small_disk_available():
        pytest.skip("needs root and unshare for a private tmpfs")
    np.save(tmp_path / "e.npy", random_unit(4000))  # a flat index of 512 kB on a disk of 256 kB
    (tmp_path / "disk").mkdir()
    args = ["index", "build", "--embeddings", tmp_path / "e.npy", "--output", tmp_path / "disk" / "idx"]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done, left = run_cli_on_small_disk(tmp_path / "disk", "256k", [*args, "--kind", "flat"], fill=fill, env=env)
    assert_one_line_disk_full(done, left, re.escape(str(tmp_path / "disk" / "idx")))
    if not fill:  # the size was known: refused before the build, saying how much it needs and has
        needed = index_files.estimated_bytes("flat", 4000, DIM, 4 * len("4000"))  # 512 kB of vectors, ids
        assert f"it needs about {disk_space.format_bytes(needed)} and 262.1 kB are free;" in done.stderr
