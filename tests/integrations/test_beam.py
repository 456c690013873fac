"""Tests of `sbert_keras.integrations.beam`: RunInference on the DirectRunner, Parquet shards, bad input."""

import argparse
import json
import os
import pathlib
import re

import numpy as np
import pytest

pytest.importorskip("apache_beam")

import sbert_keras  # noqa: E402
from conftest import tiny_encoder  # noqa: E402
from harness import run_cli_on_small_disk  # noqa: E402
from harness import small_disk_available  # noqa: E402
from sbert_keras.data import embedding_shards  # noqa: E402
from sbert_keras.data import examples  # noqa: E402
from sbert_keras.integrations import beam  # noqa: E402
from sbert_keras.utils import atomic_io  # noqa: E402
from sbert_keras.utils import disk_space  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
TEXTS = [
    "a man is playing guitar",
    "the dog runs in the park",
    "a woman eats food in the kitchen",
    "the cat sleeps on the sofa",
    "red car",
    "blue sky over the park and a fast red car",
    "a slow dog",
]
ATOL = 1e-5


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("model") / "tiny.keras"
    tiny_encoder().save(path)
    return str(path)


@pytest.fixture(scope="module")
def reference(model_file):
    """`encode` of TEXTS by the saved model, float32."""
    return sbert_keras.SentenceEncoder.from_preset(model_file).encode(TEXTS, compute="float32", show_progress=False)


def write_lines(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return str(path)


def embed(model_file, input, output, **kwargs):
    kwargs.setdefault("compute", "float32")
    return beam.embed_corpus(model_file, input, str(output), beam_batch_size=3, **kwargs)


def test_text_lines_ids_are_line_numbers(tmp_path, model_file, reference):
    # A blank line is skipped; the ids stay the 1-based line numbers.
    lines = TEXTS[:3] + [""] + TEXTS[3:]
    source = write_lines(tmp_path / "corpus.txt", lines)
    result = embed(model_file, source, tmp_path / "out")
    assert result["texts"] == len(TEXTS) and result["dim"] == 8
    ids, vectors = beam.read_embeddings(tmp_path / "out")
    assert vectors.dtype == np.float32 and vectors.shape == (len(TEXTS), 8)
    expected = {str(n): i for i, n in enumerate([1, 2, 3, 5, 6, 7, 8])}
    assert sorted(ids, key=int) == sorted(expected, key=int)
    np.testing.assert_allclose(vectors, reference[[expected[key] for key in ids]], atol=ATOL)
    marker = json.loads((tmp_path / "out" / "complete.json").read_text())
    assert marker["command"] == "embed-corpus" and marker["texts"] == len(TEXTS)
    assert not (tmp_path / "out.partial").exists()


def test_jsonl_glob_keeps_given_ids(tmp_path, model_file, reference):
    for part, rows in enumerate((range(0, 4), range(4, len(TEXTS)))):
        lines = [json.dumps({"id": f"doc-{i}" if i % 2 else i, "text": TEXTS[i]}) for i in rows]
        write_lines(tmp_path / f"part{part}.jsonl", lines)
    embed(model_file, str(tmp_path / "part*.jsonl"), tmp_path / "out")
    ids, vectors = beam.read_embeddings(tmp_path / "out")
    index = {(f"doc-{i}" if i % 2 else str(i)): i for i in range(len(TEXTS))}
    assert sorted(ids) == sorted(index)
    np.testing.assert_allclose(vectors, reference[[index[key] for key in ids]], atol=ATOL)


def test_several_text_files_prefix_line_numbers(tmp_path, model_file, reference):
    write_lines(tmp_path / "a.txt", TEXTS[:2])
    write_lines(tmp_path / "b.txt", TEXTS[2:4])
    # Through the CLI's options: unknown options are Beam's pipeline options.
    parser = beam.add_arguments(argparse.ArgumentParser())
    argv = ["--model", model_file, "--input", str(tmp_path / "*.txt"), "--output", str(tmp_path / "out")]
    argv += ["--compute", "float32", "--beam-batch-size", "2", "--runner", "DirectRunner"]
    args, args.pipeline_args = parser.parse_known_args(argv)
    assert args.pipeline_args == ["--runner", "DirectRunner"]
    assert beam.run(args)["texts"] == 4
    ids, vectors = beam.read_embeddings(tmp_path / "out")
    index = {"a.txt:1": 0, "a.txt:2": 1, "b.txt:1": 2, "b.txt:2": 3}
    assert sorted(ids) == sorted(index)
    np.testing.assert_allclose(vectors, reference[[index[key] for key in ids]], atol=ATOL)


@pytest.mark.large
def test_direct_runner_multi_processing_two_workers(tmp_path, model_file, reference, monkeypatch):
    # The SDK workers are subprocesses: they must import this checkout's sbert_keras.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    source = write_lines(tmp_path / "corpus.txt", TEXTS)
    args = ["--direct_num_workers", "2", "--direct_running_mode", "multi_processing"]
    result = embed(model_file, source, tmp_path / "out", pipeline_args=args)
    assert result["texts"] == len(TEXTS)
    ids, vectors = beam.read_embeddings(tmp_path / "out")
    assert sorted(ids, key=int) == [str(n) for n in range(1, len(TEXTS) + 1)]
    np.testing.assert_allclose(vectors, reference[[int(key) - 1 for key in ids]], atol=ATOL)


@pytest.mark.parametrize(
    "line, reason",
    [
        ('{"id": 1}', "missing key 'text'"),
        ('{"id": 1, "text": 5}', "'text' is not a string"),
        ('{"id": 1, "text": null}', "'text' is not a string"),
        ('{"text": "a dog"}', "missing key 'id'"),
        ('{"id": [1], "text": "a dog"}', "'id' is not a string or an integer"),
        ("not json", "invalid JSON"),
    ],
)
def test_bad_jsonl_line_names_file_and_line(tmp_path, line, reason):
    path = write_lines(tmp_path / "bad.jsonl", ['{"id": 0, "text": "a cat"}', "", line])
    with pytest.raises(examples.DataFormatError, match=rf"bad\.jsonl, line 3: {reason}"):
        list(beam.read_records(path))


def test_bad_jsonl_line_fails_the_pipeline_with_file_and_line(tmp_path, model_file):
    source = write_lines(tmp_path / "bad.jsonl", ['{"id": 0, "text": "a cat"}', '{"id": 1, "txt": "a dog"}'])
    with pytest.raises(ValueError, match=r"^\S*bad\.jsonl, line 2: missing key 'text' \(expected"):
        embed(model_file, source, tmp_path / "out")
    assert not (tmp_path / "out").exists() and not (tmp_path / "out.partial").exists()


class _FailingPipeline:
    def __init__(self, error):
        self.error = error

    def run(self):
        raise self.error


def test_worker_error_text_becomes_value_error_naming_file_and_line():
    # What the multi-processing DirectRunner raises: the worker's traceback as text.
    trace = (
        "Traceback (most recent call last):\n  File ...\n"
        "sbert_keras.data.examples.DataFormatError: /data/c.jsonl, line 9: 'text' is not a string: 3\n"
    )
    with pytest.raises(ValueError, match=r"^/data/c\.jsonl, line 9: 'text' is not a string: 3$"):
        beam.run_pipeline(_FailingPipeline(RuntimeError(trace)))
    with pytest.raises(RuntimeError, match="worker lost"):
        beam.run_pipeline(_FailingPipeline(RuntimeError("worker lost")))


def test_not_utf8_names_file_and_line(tmp_path):
    path = tmp_path / "latin1.txt"
    path.write_bytes("a cat\ncaf\u00e9\n".encode("latin-1"))
    with pytest.raises(examples.DataFormatError, match=r"latin1\.txt, line 2: byte 0xe9"):
        list(beam.read_records(str(path)))


def test_empty_input_is_a_clear_error(tmp_path, model_file):
    (tmp_path / "empty.txt").write_text("")
    with pytest.raises(ValueError, match="empty input"):
        embed(model_file, str(tmp_path / "empty.txt"), tmp_path / "out")
    write_lines(tmp_path / "blank.txt", ["", "  "])
    with pytest.raises(ValueError, match="empty input"):
        embed(model_file, str(tmp_path / "blank.txt"), tmp_path / "out")
    assert not (tmp_path / "out").exists() and not (tmp_path / "out.partial").exists()
    with pytest.raises(FileNotFoundError, match="no file matches"):
        embed(model_file, str(tmp_path / "missing*.txt"), tmp_path / "out")
    with pytest.raises(FileNotFoundError, match="no file matches"):
        beam.match_input(tmp_path)  # a folder


def test_existing_output_is_refused_unless_overwrite(tmp_path, model_file, reference):
    source = write_lines(tmp_path / "corpus.txt", TEXTS[:2])
    embed(model_file, source, tmp_path / "out")
    with pytest.raises(ValueError, match="already holds embeddings; pass --overwrite"):
        embed(model_file, source, tmp_path / "out")
    source = write_lines(tmp_path / "corpus.txt", TEXTS[:3])
    embed(model_file, source, tmp_path / "out", overwrite=True)
    ids, vectors = beam.read_embeddings(tmp_path / "out")
    assert sorted(ids) == ["1", "2", "3"]
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="not embedding shards: 'notes.txt'"):
        embed(model_file, source, tmp_path / "other", overwrite=True)


def test_read_embeddings_refuses_an_incomplete_folder(tmp_path, model_file):
    source = write_lines(tmp_path / "corpus.txt", TEXTS[:2])
    embed(model_file, source, tmp_path / "out")
    os.remove(tmp_path / "out" / "complete.json")
    with pytest.raises(atomic_io.IncompleteOutputError, match="complete.json"):
        beam.read_embeddings(tmp_path / "out")


def test_handler_batching_and_inference(model_file, reference):
    handler = beam.SentenceEncoderModelHandler(
        model_file, batch_size=2, compute="float32", min_batch_size=8, max_batch_size=64
    )
    assert handler.batch_elements_kwargs() == {"min_batch_size": 8, "max_batch_size": 64}
    assert not handler.share_model_across_processes()
    results = list(handler.run_inference(TEXTS, handler.load_model()))
    assert [r.example for r in results] == TEXTS
    np.testing.assert_allclose(np.stack([r.inference for r in results]), reference, atol=ATOL)
    with pytest.raises(ValueError, match="compute"):
        beam.SentenceEncoderModelHandler(model_file, compute="fp8")
    threads = beam.SentenceEncoderModelHandler(model_file, env_vars={"TF_NUM_INTRAOP_THREADS": "1"})
    assert beam.KeyedModelHandler(threads)._env_vars == {"TF_NUM_INTRAOP_THREADS": "1"}


def test_duplicate_ids_are_refused_before_the_pipeline_naming_both_lines(tmp_path, model_file, monkeypatch):
    write_lines(tmp_path / "a.jsonl", [json.dumps({"id": 1, "text": TEXTS[0]}), json.dumps({"id": 2, "text": "x"})])
    write_lines(tmp_path / "b.jsonl", ["", json.dumps({"id": "1", "text": TEXTS[1]})])

    def no_model(*args, **kwargs):
        raise AssertionError("the model loaded before the input was checked")

    monkeypatch.setattr(sbert_keras.SentenceEncoder, "from_preset", no_model)
    expected = r"b\.jsonl, line 2: duplicate id '1', first at \S*a\.jsonl, line 1 \(ids are stored as strings"
    with pytest.raises(examples.DataFormatError, match=expected):
        embed(model_file, str(tmp_path / "*.jsonl"), tmp_path / "out")
    assert not (tmp_path / "out").exists() and not (tmp_path / "out.partial").exists()
    write_lines(tmp_path / "c.jsonl", [json.dumps({"id": "doc", "text": "a"}), json.dumps({"id": "doc", "text": "b"})])
    with pytest.raises(
        examples.DataFormatError, match=r"c\.jsonl, line 2: duplicate id 'doc', first at \S*c\.jsonl, line 1"
    ):
        beam.scan_input([str(tmp_path / "c.jsonl")])
    # Plain text: the ids are line numbers, distinct; the scan counts the texts and id bytes.
    summary = beam.scan_input([write_lines(tmp_path / "d.txt", ["a", "", "b"])])
    assert (summary.texts, summary.id_bytes) == (2, 2)


@pytest.mark.parametrize("fill", [False, True], ids=["checked-first", "met-while-writing"])
def test_disk_full_during_embed_corpus_is_one_line_and_leaves_nothing(tmp_path, model_file, fill):
    if not small_disk_available():
        pytest.skip("needs root and unshare for a private tmpfs")
    source = write_lines(tmp_path / "corpus.txt", TEXTS)
    (tmp_path / "disk").mkdir()
    target = tmp_path / "disk" / "out"
    args = ["embed-corpus", "--model", model_file, "--input", source, "--output", target, "--compute", "float32"]
    env = dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="3")
    done, left = run_cli_on_small_disk(tmp_path / "disk", "256k", args, fill=fill, env=env)
    last = done.stderr.strip().splitlines()[-1]
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert re.fullmatch(rf"sbert-keras embed-corpus: error: not enough disk space for {target}: .*", last)
    assert left == []  # neither the output nor its working folder
    if not fill:  # checked before the pipeline: the shards' size from the texts read
        needed = embedding_shards.estimated_bytes(len(TEXTS), 8, len(TEXTS))
        assert f"it needs about {disk_space.format_bytes(needed)} and 262.1 kB are free;" in last


def test_a_shard_changed_after_it_was_written_is_refused_by_name(tmp_path, model_file):
    source = write_lines(tmp_path / "corpus.txt", TEXTS)
    embed(model_file, source, tmp_path / "out")
    marker = json.loads((tmp_path / "out" / "complete.json").read_text())
    assert sorted(marker["sha256"]) == sorted(marker["shards"])
    _, vectors = beam.read_embeddings(tmp_path / "out")
    shard = tmp_path / "out" / marker["shards"][0]
    raw = bytearray(shard.read_bytes())
    found = [raw.find(value.tobytes()) for value in vectors.reshape(-1)]
    at = next(i for i in found if i >= 0)
    raw[at] ^= 0x01  # one flipped bit of one float: still a valid Parquet file and a finite vector
    shard.write_bytes(bytes(raw))
    with pytest.raises(ValueError, match=rf"embeddings shard .*{re.escape(shard.name)} does not match the SHA-256"):
        beam.read_embeddings(tmp_path / "out")


def test_a_folder_without_checksums_is_read_with_one_warning(tmp_path, model_file):
    source = write_lines(tmp_path / "corpus.txt", TEXTS[:3])
    embed(model_file, source, tmp_path / "old")
    marker_path = tmp_path / "old" / "complete.json"
    marker = json.loads(marker_path.read_text())
    del marker["sha256"]  # as written by an earlier release
    marker_path.write_text(json.dumps(marker))
    with pytest.warns(UserWarning, match=r"records no shard checksums .* read unverified") as caught:
        ids, _ = beam.read_embeddings(tmp_path / "old")
        beam.read_embeddings(tmp_path / "old")
    assert len(ids) == 3 and len([w for w in caught if "checksums" in str(w.message)]) == 1
