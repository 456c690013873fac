"""The `sbert-keras` command line, end to end."""

import argparse
import json
import os
import re
import shlex
import subprocess
import sys

import keras
import numpy as np
import pytest

import sbert_keras
from conftest import ROOT
from conftest import large
from conftest import minilm_path
from conftest import shared_path
from conftest import tiny_encoder
from harness import cli_env
from harness import interrupt_when_paused
from harness import run_until_paused
from sbert_keras import SentenceEncoder
from sbert_keras.cli import parser as cli_parser
from sbert_keras.cli.parser import build_parser
from sbert_keras.cli.parser import main
from sbert_keras.cli.train import command_line
from sbert_keras.data.embedding_shards import read_embeddings
from sbert_keras.training.step_log import read_rows
from sbert_keras.utils import atomic_io
from sbert_keras.utils import defaults

CORPUS = [
    "a man is playing guitar",
    "a man is playing piano",
    "the cat sleeps on the sofa",
    "the cat sleeps",
    "a red car is fast",
    "the blue car is slow",
]


def run_cli(capsys, *args):
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    assert code == 0, out.err[-2000:]
    return json.loads(out.out)


@pytest.fixture
def encoder_file(tmp_path):
    path = tmp_path / "tiny.keras"
    tiny_encoder(normalize=True).save(path)
    return path


def test_encode_search_cluster_export(capsys, tmp_path, encoder_file):
    lines = tmp_path / "corpus.txt"
    lines.write_text("\n".join(CORPUS) + "\n")
    out = run_cli(capsys, "encode", "--model", encoder_file, "--input", lines, "--output", tmp_path / "e.npy")
    assert out["texts"] == 6 and np.load(tmp_path / "e.npy").shape == (6, 8)
    assert out["route"]  # the route that ran, e.g. "fused/bfloat16"
    hits = run_cli(
        capsys, "search", "--model", encoder_file, "--corpus", lines, "--query", "a man is playing guitar", "--top-k", 2
    )
    assert hits[0]["hits"][0]["text"] == "a man is playing guitar"
    clusters = run_cli(
        capsys, "cluster", "--model", encoder_file, "--input", lines, "--method", "kmeans", "--num-clusters", 2
    )
    assert sum(len(c) for c in clusters["clusters"]) == 6
    exported = run_cli(capsys, "export", "--model", encoder_file, "--output", tmp_path / "sm" / "1")
    assert os.path.isfile(tmp_path / "sm" / "1" / "saved_model.pb")
    assert exported["input"] == "text: string[None]"


def test_bad_input_file_is_a_clear_error(capsys, tmp_path, encoder_file):
    bad = tmp_path / "bad.csv"
    bad.write_text("main-captions\tMSRvid\t2012test\t0001\t5.000\tonly one sentence\n")
    code = main(["evaluate", "--model", str(encoder_file), "--sts", str(bad)])
    err = capsys.readouterr().err
    assert code == 2 and "bad.csv, line 1" in err


@pytest.mark.large
def test_train_then_evaluate_real_minilm_and_reload(tmp_path):
    model = minilm_path()
    sts = shared_path("data", "stsbenchmark")
    train = tmp_path / "train.csv"
    dev = tmp_path / "dev.csv"
    train.write_text("".join(open(sts / "sts-train.csv", encoding="utf-8").readlines()[:48]))
    dev.write_text("".join(open(sts / "sts-dev.csv", encoding="utf-8").readlines()[:40]))
    env = dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="3")
    cli = [sys.executable, "-m", "sbert_keras.cli"]
    result = subprocess.run(
        cli
        + [
            "train",
            "--objective",
            "regression",
            "--model",
            str(model),
            "--train",
            str(train),
            "--dev",
            str(dev),
            "--epochs",
            "1",
            "--batch-size",
            "16",
            "--lr",
            "2e-5",
            "--output",
            str(tmp_path / "out"),
            "--quiet",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout)
    assert report["train_examples"] == 48
    assert 0 < report["dev_after"]["spearman_cosine"] <= 1
    assert "spearman_cosine" in report["dev_before"]
    metrics = json.load(open(tmp_path / "out" / "metrics.json"))
    assert metrics["dev_after"] == report["dev_after"]
    # One line per epoch with its steps, the dev line after it; the step log; the last line names the encoder.
    steps = len(assert_run_folder(tmp_path / "out"))
    assert re.search(rf"^{steps}/{steps} - .*loss: ", result.stderr, flags=re.MULTILINE)
    assert re.search(r"^Epoch 1/1 dev \(.*\) - dev_spearman_cosine: ", result.stderr, flags=re.MULTILINE)
    assert "Unknown" not in result.stderr
    assert f"the trained encoder is {tmp_path / 'out' / 'encoder.keras'}" in result.stderr
    result = subprocess.run(
        cli + ["evaluate", "--model", str(tmp_path / "out" / "encoder.keras"), "--sts", str(dev)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    evaluated = json.loads(result.stdout)
    assert evaluated["spearman_cosine"] == pytest.approx(report["dev_after"]["spearman_cosine"], abs=1e-6)
    # The fine-tuned encoder reloads with Keras and as a SentenceEncoder.
    reloaded = keras.saving.load_model(tmp_path / "out" / "encoder.keras")
    assert isinstance(reloaded, SentenceEncoder) and reloaded.normalize
    assert reloaded.encode("a test").shape == (384,)


# === Bad input and expected errors: one line, exit 2 ===


def run_cli_error(capsys, *args):
    code = main([str(a) for a in args])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2, err
    return err[-1]


def test_cluster_community_reports_unclustered_apart(capsys, tmp_path, encoder_file):
    lines = tmp_path / "lines.txt"
    lines.write_text("\n".join(["a dog", *CORPUS[:3], "a dog"]) + "\n")
    out = run_cli(
        capsys, "cluster", "--model", encoder_file, "--input", lines, "--method", "community", "--threshold", 0.9999
    )
    assert out["clusters"] == [["a dog", "a dog"]]
    assert out["unclustered"] == CORPUS[:3]
    out = run_cli(
        capsys, "cluster", "--model", encoder_file, "--input", lines, "--method", "kmeans", "--num-clusters", 2
    )
    assert out["unclustered"] == [] and sum(map(len, out["clusters"])) == 5


@pytest.mark.parametrize("encoding, reason", [("latin-1", "byte 0xe9"), ("utf-16", "UTF-16")])
def test_text_file_in_another_encoding_names_file_and_line(capsys, tmp_path, encoder_file, encoding, reason):
    lines = tmp_path / "lines.txt"
    lines.write_bytes("a dog\nthe cat\nun café\n".encode(encoding))
    line = 1 if encoding == "utf-16" else 3
    for args in (
        ["cluster", "--input", lines, "--num-clusters", 2],
        ["search", "--corpus", lines, "--query", "a"],
        ["search", "--corpus", corpus_file(tmp_path), "--queries", lines],
    ):
        err = run_cli_error(capsys, *args, "--model", encoder_file)
        assert err.startswith(f"sbert-keras {args[0]}: error: {lines}, line {line}: ")
        assert reason in err


def corpus_file(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(CORPUS) + "\n")
    return path


def test_empty_files_and_bad_sizes_are_clear_errors(capsys, tmp_path, encoder_file):
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    err = run_cli_error(capsys, "search", "--model", encoder_file, "--corpus", empty, "--query", "a")
    assert err == f"sbert-keras search: error: --corpus {empty} has no text lines."
    err = run_cli_error(capsys, "cluster", "--model", encoder_file, "--input", empty, "--num-clusters", 1)
    assert err == f"sbert-keras cluster: error: --input {empty} has no text lines."
    err = run_cli_error(
        capsys, "search", "--model", encoder_file, "--corpus", corpus_file(tmp_path), "--query", "a", "--batch-size", 0
    )
    assert err == "sbert-keras search: error: --batch-size must be an integer >= 1; received 0."
    for flag in (
        ["search", "--corpus", empty, "--query", "a", "--top-k", "2.5"],
        ["cluster", "--input", empty, "--num-clusters", "0"],
    ):
        with pytest.raises(SystemExit) as excinfo:
            main([str(a) for a in flag] + ["--model", str(encoder_file)])
        assert excinfo.value.code == 2
        assert "must be an integer >= 1" in capsys.readouterr().err


def test_missing_or_wrong_kind_of_input_names_the_flag(capsys, tmp_path, encoder_file):
    cluster = ["cluster", "--model", encoder_file, "--num-clusters", 2]
    err = run_cli_error(capsys, *cluster, "--input", tmp_path)
    assert err == f"sbert-keras cluster: error: --input {tmp_path} is a folder; give a file."
    err = run_cli_error(capsys, *cluster, "--input", tmp_path / "nope.txt")
    assert err == f"sbert-keras cluster: error: --input {tmp_path / 'nope.txt'}: no such file."


@pytest.mark.parametrize(
    "error, expected",
    [
        (
            ConnectionError("Max retries exceeded with url: /api/models"),
            (
                "ConnectionError: Max retries exceeded with url: /api/models. A preset name must be "
                "downloaded first (or give a local folder or .keras file)."
            ),
        ),
        (KeyError("backbone"), "missing key 'backbone'"),
        (PermissionError(13, "Permission denied"), "[Errno 13] Permission denied"),
        (ValueError("first line\n  second line"), "first line second line"),
    ],
)
def test_expected_errors_print_one_line(capsys, monkeypatch, tmp_path, error, expected):
    def fail(*args, **kwargs):
        raise error

    monkeypatch.setattr("sbert_keras.cli.commands.load_encoder", fail)
    err = run_cli_error(
        capsys, "cluster", "--model", "some_preset_en", "--input", corpus_file(tmp_path), "--num-clusters", 2
    )
    assert err == f"sbert-keras cluster: error: {expected}"


def test_unexpected_errors_keep_their_traceback(monkeypatch, tmp_path):
    def fail(*args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr("sbert_keras.cli.commands.load_encoder", fail)
    with pytest.raises(RuntimeError, match="a bug"):
        main(["cluster", "--model", "x", "--input", str(corpus_file(tmp_path)), "--num-clusters", "2"])


# --- Bad training input, checked outputs, atomic and resumable runs ---

TRIPLET_ROWS = [
    (a, b, c) for a, b, c in zip(CORPUS * 2, CORPUS[1:] + CORPUS[:1] + CORPUS[1:] + CORPUS[:1], CORPUS[::-1] * 2)
]
NLI_LINES = [
    {"gold_label": g, "sentence1": a, "sentence2": b}
    for g, a, b in zip(["entailment", "neutral", "contradiction"] * 4, CORPUS * 2, CORPUS[::-1] * 2)
]


@pytest.fixture
def files(tmp_path):
    sts = tmp_path / "sts.csv"
    sts.write_text(
        "".join(
            f"g\tf\t2012\t{i:04d}\t{i % 6}.000\t{a}\t{b}\n"
            for i, (a, b) in enumerate(zip(CORPUS * 2, CORPUS[::-1] * 2))
        )
    )
    nli = tmp_path / "snli.jsonl"
    nli.write_text("".join(json.dumps(r) + "\n" for r in NLI_LINES))
    unlabelled = tmp_path / "unlabelled.jsonl"
    unlabelled.write_text("".join(json.dumps({**r, "gold_label": "-"}) + "\n" for r in NLI_LINES))
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    triplets = tmp_path / "triplets.csv"  # as `mine-negatives` writes them
    triplets.write_text("anchor,positive,negative\n" + "".join(f"{a},{b},{c}\n" for a, b, c in TRIPLET_ROWS))
    labelled = tmp_path / "labelled.csv"
    labelled.write_text("text,label\n" + "".join(f"{t},{t.split()[1]}\n" for t in CORPUS * 2))
    pairs01 = tmp_path / "pairs01.csv"
    pairs01.write_text(
        "sentence1,sentence2,label\n"
        + "".join(f"{a},{b},{i % 2}\n" for i, (a, b) in enumerate(zip(CORPUS, CORPUS[1:])))
    )
    sentences = tmp_path / "sentences.txt"
    sentences.write_text("\n".join(CORPUS) + "\n")
    return {
        "sts": sts,
        "nli": nli,
        "unlabelled": unlabelled,
        "empty": empty,
        "triplets": triplets,
        "labelled": labelled,
        "pairs01": pairs01,
        "sentences": sentences,
    }


def cli_error(capsys, *args):
    code = main([str(a) for a in args])
    err = capsys.readouterr().err
    assert code == 2, err[-2000:]
    return err


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--lr", "-1"], "--lr must be a number in (0, 1]; received -1.0"),
        (["--lr", "nan"], "--lr must be a number in (0, 1]"),
        (["--lr", "2e5"], "--lr must be a number in (0, 1]; received 200000.0"),
        (["--epochs", "0"], "--epochs must be an integer >= 1; received 0"),
        (["--batch-size", "0"], "--batch-size must be an integer >= 1; received 0"),
        (["--limit", "0"], "--limit must be an integer >= 1; received 0"),
        (["--limit", "-30"], "--limit must be an integer >= 1; received -30"),
        (["--save-every", "0"], "--save-every must be an integer >= 1"),
    ],
)
def test_bad_train_flags_name_the_flag_before_anything_loads(capsys, tmp_path, files, flags, message):
    # The model does not exist: each error must come before it is loaded.
    err = cli_error(
        capsys,
        "train",
        "--objective",
        "regression",
        "--model",
        tmp_path / "none.keras",
        "--train",
        files["sts"],
        "--output",
        tmp_path / "out",
        *flags,
    )
    assert message in err
    assert not os.path.exists(tmp_path / "out") and not os.path.exists(tmp_path / "out.partial")


@pytest.mark.parametrize(
    "objective, kind, message",
    [
        (
            "regression",
            "nli",
            ("snli.jsonl does not fit --objective regression: The regression objective trains on STS scores"),
        ),
        (
            "classification",
            "sts",
            "sts.csv does not fit --objective classification: .*item 3 \\(0-based\\) has label 3 ",
        ),
        ("contrastive", "sts", "sts.csv does not fit --objective contrastive: .*triplets"),
        ("regression", "empty", "empty.csv: no labelled training examples."),
        ("classification", "unlabelled", r"unlabelled.jsonl: no labelled training examples \(12 unlabelled"),
        ("batch-hard", "sts", r"sts.csv, line 1: header .* lacks the columns text,label or sentence,label"),
        ("online-contrastive", "labelled", r"labelled.csv, line 1: header .* lacks the columns sentence1,sentence2"),
        ("online-contrastive", "triplets", r"triplets.csv, line 1: header .* lacks the columns sentence1,sentence2"),
    ],
)
def test_data_that_does_not_fit_the_objective_is_refused_before_training(
    capsys, tmp_path, files, objective, kind, message
):
    err = cli_error(
        capsys,
        "train",
        "--objective",
        objective,
        "--model",
        tmp_path / "none.keras",
        "--train",
        files[kind],
        "--output",
        tmp_path / "out",
    )
    assert re.search(message, err), err
    assert not os.path.exists(tmp_path / "out") and not os.path.exists(tmp_path / "out.partial")


def test_unusable_outputs_are_refused_before_any_work(capsys, tmp_path, files):
    (tmp_path / "afile").write_text("x")
    err = cli_error(
        capsys,
        "train",
        "--objective",
        "regression",
        "--model",
        tmp_path / "none.keras",
        "--train",
        files["sts"],
        "--output",
        tmp_path / "afile" / "out",
    )
    assert "afile is a file, not a folder" in err
    err = cli_error(
        capsys,
        "encode",
        "--model",
        tmp_path / "none.keras",
        "--input",
        files["sts"],
        "--output",
        tmp_path / "nodir" / "x.npy",
    )
    assert "--output" in err and "nodir does not exist" in err
    (tmp_path / "sm").mkdir()
    (tmp_path / "sm" / "saved_model.pb").write_text("an earlier export")
    err = cli_error(capsys, "export", "--model", tmp_path / "none.keras", "--output", tmp_path / "sm")
    assert "already holds an earlier result; pass --overwrite" in err


def test_a_failed_run_leaves_no_output_folder(capsys, tmp_path, files):
    # Checks pass; the model then fails to load, after the working folder was made.
    code = main(
        [
            "train",
            "--objective",
            "regression",
            "--model",
            str(tmp_path / "none.keras"),
            "--train",
            str(files["sts"]),
            "--output",
            str(tmp_path / "runs" / "out"),
        ]
    )
    assert code != 0, capsys.readouterr().err
    assert not (tmp_path / "runs").exists()  # neither out, out.partial nor the folder made for them


def test_encode_reports_the_file_it_writes(capsys, tmp_path, encoder_file):
    lines = tmp_path / "corpus.txt"
    lines.write_text("\n".join(CORPUS) + "\n")
    out = run_cli(capsys, "encode", "--model", encoder_file, "--input", lines, "--output", tmp_path / "emb")
    assert out["output"] == str(tmp_path / "emb.npy")
    assert np.load(out["output"]).shape == (6, 8)


RUN_FOLDER = ["README.md", "complete.json", "encoder.keras", "metrics.json", "model.keras", "training_log.csv"]


def assert_run_folder(folder):
    """`folder`'s README lists exactly its files; its step log counts steps 1, 2, ... with finite numbers.

    Returns:
        The step log's rows.
    """
    text = (folder / atomic_io.RUN_README).read_text()
    assert sorted(re.findall(r"^- `([^`]+)`", text, flags=re.MULTILINE)) == sorted(os.listdir(folder)) == RUN_FOLDER
    assert "\nsbert-keras train --" in text and " --objective " in text
    rows = read_rows(folder / atomic_io.TRAINING_LOG)
    assert rows and [int(row["step"]) for row in rows] == list(range(1, len(rows) + 1))
    assert all(np.isfinite(float(row[key])) for row in rows for key in ("loss", "mean_loss", "learning_rate"))
    return rows


@pytest.mark.large
def test_train_killed_mid_epoch_and_during_the_final_save_resumes_and_completes(capsys, tmp_path, files, encoder_file):
    out = tmp_path / "out"
    args = [
        "train",
        "--objective",
        "regression",
        "--model",
        encoder_file,
        "--train",
        files["sts"],
        "--output",
        out,
        "--epochs",
        "2",
        "--batch-size",
        "2",
        "--save-every",
        "1",
        "--compute",
        "float32",
        "--quiet",
    ]
    # 1. SIGKILL while the third backup of epoch 1 is being written.
    stages = run_until_paused(args, "weights-0-3.")
    assert stages[-1] == "sbert-keras test: paused at write of weights-0-3.weights.h5"
    assert not out.exists()
    state = json.loads((tmp_path / "out.partial" / "backup" / "state.json").read_text())
    assert (state["epoch"], state["steps_done"]) == (0, 2)
    # A different run with the same --output is refused, naming what differs.
    other = list(args)
    other[other.index("--epochs") + 1] = "3"
    err = cli_error(capsys, *other)
    assert "belongs to a different run (epochs: backup 2, now 3)" in err
    # 2. The same command resumes after step 2 (its step log cut back to step 2 first), and is killed
    #    during the final save.
    stages = run_until_paused(args, "encoder.keras")
    assert stages[0] == f"sbert-keras test: passed write of {atomic_io.TRAINING_LOG}"
    assert stages[1] == "sbert-keras test: passed write of weights-0-3.weights.h5"
    assert stages[-1] == "sbert-keras test: paused at write of encoder.keras"
    assert not out.exists()
    # 3. The same command finishes; the folder appears complete, with the whole history, and its last
    #    line names the encoder.
    assert main([str(a) for a in args]) == 0
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert sorted(os.listdir(out)) == RUN_FOLDER
    assert not (tmp_path / "out.partial").exists()
    assert len(json.loads((out / "metrics.json").read_text())["history"]["loss"]) == 2
    assert len(report["history"]["loss"]) == 2
    atomic_io.check_complete(out)
    assert captured.err.splitlines()[-1].startswith(f"sbert-keras train: the trained encoder is {out}/encoder.keras")
    assert report["encoder"] == f"{out}/encoder.keras" and report["training_log"] == f"{out}/{atomic_io.TRAINING_LOG}"
    rows = assert_run_folder(out)  # each step logged once, across the kill and the resumption
    assert [int(row["epoch"]) for row in rows] == [1] * (len(rows) // 2) + [2] * (len(rows) // 2)
    # 4. A completed run is not overwritten without --overwrite.
    err = cli_error(capsys, *args)
    assert "already holds a completed run; pass --overwrite" in err


def test_encode_and_export_killed_during_the_save_leave_no_partial_result(capsys, tmp_path, encoder_file):
    lines = tmp_path / "corpus.txt"
    lines.write_text("\n".join(CORPUS) + "\n")
    np.save(tmp_path / "e.npy", np.zeros(3))  # an earlier result
    encode = ["encode", "--model", encoder_file, "--input", lines, "--output", tmp_path / "e.npy", "--overwrite"]
    run_until_paused(encode, "e.npy")
    np.testing.assert_allclose(np.load(tmp_path / "e.npy"), np.zeros(3))  # intact, not half-written
    assert run_cli(capsys, *encode)["texts"] == 6 and np.load(tmp_path / "e.npy").shape == (6, 8)
    export = ["export", "--model", encoder_file, "--output", tmp_path / "sm" / "1"]
    run_until_paused(export, "finalize")
    assert not (tmp_path / "sm" / "1").exists()
    run_cli(capsys, *export)
    assert sorted(os.listdir(tmp_path / "sm")) == ["1"]
    assert (tmp_path / "sm" / "1" / "saved_model.pb").is_file() and atomic_io.is_complete(tmp_path / "sm" / "1")
    assert "already holds a completed run" in cli_error(capsys, *export)
    run_cli(capsys, *export, "--overwrite")


@pytest.mark.large
def test_encode_and_export_with_keras_int8_quantization(capsys, tmp_path, encoder_file):
    lines = tmp_path / "corpus.txt"
    lines.write_text("\n".join(CORPUS) + "\n")
    run_cli(
        capsys,
        "encode",
        "--model",
        encoder_file,
        "--input",
        lines,
        "--output",
        tmp_path / "f.npy",
        "--compute",
        "float32",
    )
    out = run_cli(
        capsys,
        "encode",
        "--model",
        encoder_file,
        "--input",
        lines,
        "--output",
        tmp_path / "q.npy",
        "--quantize",
        "int8",
    )
    assert out["texts"] == 6
    full, quantized = np.load(tmp_path / "f.npy"), np.load(tmp_path / "q.npy")
    cosines = np.sum(full * quantized, axis=1) / np.linalg.norm(full, axis=1) / np.linalg.norm(quantized, axis=1)
    assert cosines.min() > 0.95  # int8 weights of a random tiny model: close, not equal
    exported = run_cli(capsys, "export", "--model", encoder_file, "--output", tmp_path / "sm", "--quantize", "int8")
    assert os.path.isfile(tmp_path / "sm" / "saved_model.pb") and exported["compute"] in defaults.COMPUTES[1:]


def test_train_optimizer_flags_default_to_the_shared_defaults():
    base = ["train", "--objective", "cosent", "--model", "m", "--train", "t.csv", "--output", "o"]
    args = build_parser().parse_args(base)
    assert (args.weight_decay, args.clip_norm) == (defaults.WEIGHT_DECAY, defaults.CLIP_NORM)
    args = build_parser().parse_args(base + ["--weight-decay", "0", "--clip-norm", "0"])
    assert (args.weight_decay, args.clip_norm) == (0.0, 0.0)


def test_train_compute_takes_the_compute_vocabulary(capsys):
    base = ["train", "--objective", "regression", "--model", "m", "--train", "t.csv", "--output", "o"]
    for word in defaults.POLICY_COMPUTES:
        assert build_parser().parse_args(base + ["--compute", word]).compute == word
    assert build_parser().parse_args(base + ["--compute", "mixed_bfloat16"]).compute == "bfloat16"
    assert "--compute mixed_bfloat16 is deprecated; use --compute bfloat16" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        build_parser().parse_args(base + ["--compute", "int8"])
    assert "must be one of auto, float32, bfloat16, float16, got 'int8'" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["train", "export", "encode"])
def test_precision_as_a_compute_word_names_compute(capsys, command):
    base = {
        "train": ["train", "--objective", "regression", "--model", "m", "--train", "t.csv", "--output", "o"],
        "export": ["export", "--model", "m", "--output", "o"],
        "encode": ["encode", "--model", "m", "--input", "i.txt", "--output", "o.npy"],
    }[command]
    with pytest.raises(SystemExit):
        build_parser().parse_args(base + ["--precision", "bfloat16"])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "argument --precision" in err and "--compute bfloat16" in err, err


def test_encode_precision_quantizes_the_saved_embeddings(capsys, tmp_path, encoder_file):
    lines = tmp_path / "corpus.txt"
    lines.write_text("\n".join(CORPUS) + "\n")
    base = ["encode", "--model", encoder_file, "--input", lines, "--compute", "float32"]
    run_cli(capsys, *base, "--output", tmp_path / "f.npy")
    floats = np.load(tmp_path / "f.npy")
    for precision, dtype, width in (("ubinary", np.uint8, 1), ("binary", np.int8, 1), ("uint8", np.uint8, 8)):
        out = run_cli(capsys, *base, "--precision", precision, "--output", tmp_path / f"{precision}.npy")
        saved = np.load(tmp_path / f"{precision}.npy")
        assert saved.dtype == dtype and saved.shape == (6, width) and out["dtype"] == np.dtype(dtype).name
        assert out["precision"] == precision and out["dim"] == 8
    np.testing.assert_array_equal(np.load(tmp_path / "ubinary.npy"), np.packbits(floats > 0, axis=-1))


# --- embed-corpus (Apache Beam) and index build|search (faiss) ---


def test_help_lists_embed_corpus_and_index(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "embed-corpus" in out and "index" in out


def test_embed_corpus_help_and_missing_apache_beam(capsys, monkeypatch):
    pytest.importorskip("apache_beam")
    with pytest.raises(SystemExit):
        main(["embed-corpus", "--help"])
    assert "--beam-batch-size" in capsys.readouterr().out
    import sbert_keras

    monkeypatch.delattr(sbert_keras, "beam", raising=False)
    monkeypatch.setitem(sys.modules, "sbert_keras.integrations.beam", None)  # as if apache-beam were not installed
    code = main(["embed-corpus", "--model", "m.keras", "--input", "a.txt", "--output", "out"])
    err = capsys.readouterr().err.splitlines()[-1]
    assert code == 2 and err.startswith("sbert-keras embed-corpus: error:") and "[beam]" in err


def test_embed_corpus_then_index_build_and_search(capsys, tmp_path, encoder_file):
    pytest.importorskip("apache_beam")
    pytest.importorskip("faiss")
    lines = tmp_path / "corpus.txt"
    lines.write_text("\n".join(CORPUS) + "\n")
    folder = tmp_path / "emb"
    # --direct_num_workers is Beam's own option, passed through.
    out = run_cli(
        capsys, "embed-corpus", "--model", encoder_file, "--input", lines, "--output", folder,
        "--compute", "float32", "--direct_num_workers", 1,
    )  # fmt: skip
    assert out["texts"] == 6 and out["dim"] == 8 and any(folder.glob("*.parquet"))
    built = run_cli(capsys, "index", "build", "--embeddings", folder, "--output", tmp_path / "idx", "--kind", "flat")
    assert built["count"] == 6 and built["dim"] == 8
    code = main(["index", "search", "--index", str(tmp_path / "idx"), "--model", str(encoder_file),
                 "--query", CORPUS[2], "--query", CORPUS[4], "--top-k", "2"])  # fmt: skip
    out = capsys.readouterr()
    assert code == 0, out.err[-2000:]
    results = [json.loads(line) for line in out.out.splitlines()]  # one JSON line per query
    assert [r["query"] for r in results] == [CORPUS[2], CORPUS[4]]
    assert [r["hits"][0]["id"] for r in results] == ["3", "5"]  # 1-based line numbers
    assert results[0]["hits"][0]["score"] == pytest.approx(1.0, abs=1e-4)
    # A bit flipped in a shard's floats after it was written: `index build` refuses it, naming the shard.
    _, vectors = read_embeddings(folder)
    shard = sorted(folder.glob("*.parquet"))[0]
    data = bytearray(shard.read_bytes())
    at = next(i for i in (data.find(v.tobytes()) for v in vectors.reshape(-1)) if i >= 0)
    data[at] ^= 0x01
    shard.write_bytes(bytes(data))
    err = run_cli_error(
        capsys, "index", "build", "--embeddings", folder, "--output", tmp_path / "idx2", "--kind", "flat"
    )
    assert err.startswith(f"sbert-keras index: error: embeddings shard {shard} does not match the SHA-256")
    assert not (tmp_path / "idx2").exists()


def test_index_without_faiss_is_a_one_line_error(capsys, monkeypatch, tmp_path, encoder_file):
    monkeypatch.setattr("sbert_keras.retrieval.index.faiss", None)
    np.save(tmp_path / "e.npy", np.eye(3, 8, dtype="float32"))
    err = cli_error(capsys, "index", "build", "--embeddings", tmp_path / "e.npy", "--output", tmp_path / "idx")
    assert "error:" in err and "faiss" in err


# --- mine-negatives and evaluate --ir ---


def test_mine_negatives_writes_triplets_and_keeps_the_library_defaults(capsys, tmp_path, encoder_file):
    pairs = tmp_path / "pairs.csv"
    pairs.write_text("anchor,positive\n" + "".join(f'"{a}","{b}"\n' for a, b in zip(CORPUS[::2], CORPUS[1::2])))
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(CORPUS) + "\n")
    output = tmp_path / "triplets.csv"
    args = ["mine-negatives", "--model", encoder_file, "--pairs", pairs, "--corpus", corpus, "--output", output]
    out = run_cli(capsys, *args, "--num-negatives", 2)
    assert out["pairs"] == 3 and out["triplets"] == 6 and out["anchors_short"] == 0
    triplets = outputs_of(output)
    assert len(triplets) == 6 and all(n not in (a, p) for a, p, n in triplets)
    assert "already exists" in cli_error(capsys, *args)
    out = run_cli(capsys, *args, "--overwrite", "--sampling", "random", "--seed", 1)
    assert out["triplets"] == 9  # num_negatives: the library's default, 3
    with pytest.raises(SystemExit):  # a usage error, before anything loads
        main([str(a) for a in args] + ["--num-negatives", "0"])
    assert "argument --num-negatives: must be an integer >= 1" in capsys.readouterr().err
    err = cli_error(capsys, *args, "--overwrite", "--range-min", 4, "--range-max", 2)
    assert "--range-min (4) must be smaller than --range-max (2)" in err
    bad = tmp_path / "bad.csv"
    bad.write_text("text,label\na,b\n")
    assert f"{bad}, line 1" in cli_error(capsys, *args[:3], "--pairs", bad, "--output", tmp_path / "x.csv")


def outputs_of(path):
    from sbert_keras.data import readers

    t = readers.read_triplets_csv(str(path))
    return list(zip(t.anchor, t.positive, t.negative))


def write_beir(folder):
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(CORPUS))
    )
    (folder / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": f"q{i}", "text": CORPUS[i]}) + "\n" for i in (0, 2))
    )
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq0\td0\t1\nq2\td2\t1\n")
    return folder


def test_evaluate_ir_prints_retrieval_metrics(capsys, tmp_path, encoder_file):
    folder = write_beir(tmp_path / "beir")
    out = run_cli(capsys, "evaluate", "--model", encoder_file, "--ir", folder)
    assert out["cosine_mrr@10"] == pytest.approx(1.0) and out[out["primary"]] == pytest.approx(1.0)
    err = cli_error(capsys, "evaluate", "--model", encoder_file, "--ir", folder, "--split", "dev")
    assert "dev.tsv" in err


# --- train --objective cosent|angle, --matryoshka-dims ---


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--objective", "angle", "--matryoshka-dims", "8,4"], "--matryoshka-dims does not apply to --objective angle"),
        (["--objective", "cosent", "--matryoshka-dims", "8,x"], "argument --matryoshka-dims: must be distinct"),
        (["--objective", "cosent", "--matryoshka-dims", "8,0"], "argument --matryoshka-dims: must be distinct"),
        (["--objective", "ranking"], "argument --objective: invalid choice"),
        (["--objective", "regression", "--hard-negatives"], "--hard-negatives applies to --objective contrastive only"),
        (["--objective", "cosent", "--mini-batch-size", "2"], "--mini-batch-size applies to --objective contrastive"),
        (
            ["--objective", "contrastive", "--mini-batch-size", "0"],
            "argument --mini-batch-size: must be an integer >= 1",
        ),
        (["--objective", "distill"], "--objective distill needs --teacher MODEL"),
        (["--objective", "cosent", "--teacher", "t.keras"], "--teacher applies to --objective distill only"),
        (["--objective", "cosent", "--weight-decay", "-0.01"], "argument --weight-decay: must be a finite number >= 0"),
        (["--objective", "cosent", "--clip-norm", "nan"], "argument --clip-norm: must be a finite number >= 0"),
    ],
)
def test_new_objective_flags_name_the_flag_before_anything_loads(capsys, tmp_path, files, flags, message):
    args = ["train", "--model", tmp_path / "none.keras", "--train", files["sts"], "--output", tmp_path / "out", *flags]
    try:
        code = main([str(a) for a in args])
    except SystemExit as exit:  # a usage error
        code = exit.code
    assert code == 2 and message in capsys.readouterr().err
    assert not os.path.exists(tmp_path / "out")


def test_train_cosent_with_matryoshka_dims_and_adamw(capsys, tmp_path, files, encoder_file):
    policy = keras.config.dtype_policy().name
    out = run_cli(
        capsys, "train", "--objective", "cosent", "--model", encoder_file, "--train", files["sts"],
        "--output", tmp_path / "run", "--matryoshka-dims", "8,4", "--batch-size", 4, "--quiet",
        "--weight-decay", 0.01, "--clip-norm", 1.0, "--seed", 3,
    )  # fmt: skip
    assert out["objective"] == "cosent" and out["matryoshka_dims"] == [8, 4]
    assert (out["seed"], out["weight_decay"], out["clip_norm"]) == (3, 0.01, 1.0)
    optimizer = load_run(tmp_path / "run")[0].optimizer
    assert isinstance(optimizer, keras.optimizers.AdamW) and optimizer.weight_decay == pytest.approx(0.01)
    assert optimizer.global_clipnorm == pytest.approx(1.0)
    assert np.isfinite(out["history"]["loss"][0]) and os.path.exists(tmp_path / "run" / "encoder.keras")
    assert_run_folder(tmp_path / "run")
    # `--compute auto` (bfloat16 on a bf16 CPU) held for the run only: the caller's policy is back.
    assert keras.config.dtype_policy().name == policy


def load_run(folder):
    """The `model.keras` and `encoder.keras` of a finished `train` run."""
    return keras.saving.load_model(folder / "model.keras"), keras.saving.load_model(folder / "encoder.keras")


def test_train_contrastive_cached_with_hard_negatives_saves_and_loads(capsys, tmp_path, files, encoder_file):
    out = run_cli(
        capsys, "train", "--objective", "contrastive", "--model", encoder_file, "--train", files["triplets"],
        "--output", tmp_path / "run", "--mini-batch-size", 2, "--batch-size", 8, "--hard-negatives", "--quiet",
        "--batching", "shuffle",
    )  # fmt: skip
    assert out["mini_batch_size"] == 2 and out["hard_negatives"] is True
    assert np.isfinite(out["history"]["loss"][0])
    model, encoder = load_run(tmp_path / "run")
    assert type(model).__name__ == "CachedContrastiveSiamese" and model.mini_batch_size == 2
    assert model.active_roles == ("anchor", "positive", "negative")
    assert encoder.encode(["a man"]).shape == (1, 8)


@pytest.mark.large
def test_train_contrastive_without_hard_negatives_trains_on_pairs(capsys, tmp_path, files, encoder_file):
    with pytest.warns(UserWarning, match="negatives unused; pass hard_negatives=True") as warned:
        out = run_cli(
            capsys, "train", "--objective", "contrastive", "--model", encoder_file, "--train", files["triplets"],
            "--output", tmp_path / "run", "--batch-size", 4, "--quiet",
        )  # fmt: skip
    assert sum("negatives unused" in str(w.message) for w in warned) == 1  # said once, not by the data check too
    assert "hard_negatives" not in out
    model, _ = load_run(tmp_path / "run")
    assert type(model).__name__ == "ContrastiveSiamese" and model.active_roles == ("anchor", "positive")
    text = help_text(capsys, "train")
    assert "--hard-negatives contrastive: also train on the third column" in text
    assert "without it, (anchor, positive) pairs only" in text and "--mini-batch-size N" in text


def help_text(capsys, command):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    return " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize(
    "objective, kind, model_class",
    [
        ("batch-hard", "labelled", "BatchHardTripletModel"),
        large("online-contrastive", "pairs01", "RegressionSiamese"),
        ("distill", "sentences", "DistillationModel"),
        large("distill", "sts", "DistillationModel"),
    ],
)
def test_train_the_new_objectives(capsys, tmp_path, files, encoder_file, objective, kind, model_class):
    teacher = ["--teacher", encoder_file] if objective == "distill" else []
    out = run_cli(
        capsys, "train", "--objective", objective, "--model", encoder_file, "--train", files[kind],
        "--output", tmp_path / "run", "--batch-size", 4, "--quiet", *teacher,
    )  # fmt: skip
    assert out["objective"] == objective and np.isfinite(out["history"]["loss"][0])
    assert_run_folder(tmp_path / "run")
    # distill on an STS file: its distinct sentences (CORPUS, each in both columns).
    assert out["train_examples"] == {"labelled": 12, "pairs01": 5, "sentences": 6, "sts": 6}[kind]
    model, _ = load_run(tmp_path / "run")
    assert type(model).__name__ == model_class


def test_distill_with_a_teacher_of_another_dimension_is_one_line(capsys, tmp_path, files, encoder_file):
    small = tiny_encoder(normalize=True)
    teacher = SentenceEncoder(small.backbone, small.preprocessor, projections=[keras.layers.Dense(4, dtype="float32")])
    teacher.save(tmp_path / "teacher.keras")
    err = cli_error(
        capsys, "train", "--objective", "distill", "--model", encoder_file, "--train", files["sentences"],
        "--output", tmp_path / "run", "--teacher", tmp_path / "teacher.keras",
    )  # fmt: skip
    assert "error: The teacher's embeddings have 4 dimensions and the student's 8" in err
    assert not os.path.exists(tmp_path / "run") and not os.path.exists(tmp_path / "run.partial")


# === A CLI that explains itself: help, defaults, early checks, ids, status lines, --version ===


def subcommands(parser):
    """The `_SubParsersAction` of a parser's subcommands (argparse keeps them there), or None."""
    return next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)


def every_parser():
    """`{command line: parser}` of every subcommand of `sbert-keras`, `index build` and `index search` included."""
    parsers = {}
    for name, sub in subcommands(build_parser()).choices.items():
        parsers[name] = sub
        inner = subcommands(sub)
        parsers.update({f"{name} {n}": p for n, p in (inner.choices.items() if inner else ())})
    return parsers


def test_help_describes_every_command_and_every_flag_with_its_default():
    top = build_parser()
    assert top.description == cli_parser.DESCRIPTION and "This module holds" not in top.format_help()
    listed = {a.dest: a.help for a in subcommands(top)._choices_actions}
    assert listed == cli_parser.SUMMARIES  # each command's line in `sbert-keras --help`
    parsers = every_parser()
    assert set(parsers) == {*cli_parser.SUMMARIES, "index build", "index search"}
    summaries = {
        **cli_parser.SUMMARIES,
        **{f"index {a.dest}": a.help for a in subcommands(parsers["index"])._choices_actions},
    }
    for name, parser in parsers.items():
        description, summary = " ".join(parser.description.split()), summaries[name]
        assert description.startswith(summary[0].upper() + summary[1:] + "."), name  # its own description
        assert "mine_hard_negatives" not in parser.format_help()
        formatter = parser._get_formatter()
        for action in parser._actions:
            if not action.option_strings or isinstance(action, argparse._HelpAction):
                continue
            assert action.help and action.help.strip(), f"{name} {action.option_strings[0]} has no help"
            if action.default not in (None, False):  # the default shows in --help
                assert "(default" in formatter._get_help_string(action), (name, action.dest)


def test_help_lines_say_what_each_flag_defaults_to(capsys):
    text = help_text(capsys, "mine-negatives")
    assert "--num-negatives NUM_NEGATIVES negatives per anchor (default: 3)" in text
    assert "(default: top)" in text and "mine_hard_negatives'" not in text
    text = help_text(capsys, "encode")
    assert "--batch-size BATCH_SIZE texts per forward pass (default: 32)" in text
    assert "--normalize, --no-normalize" in text and "(default: what the model's configuration says)" in text
    text = help_text(capsys, "search")
    assert "--top-k TOP_K hits per query (default: 10)" in text and "1-based line number" in text
    # cluster --threshold: a distance for agglomerative, a similarity for community detection.
    text = help_text(capsys, "cluster")
    assert "agglomerative: a cosine DISTANCE (1 - cos, 0 to 2)" in text
    assert "community: a cosine SIMILARITY (-1 to 1)" in text and "(default: 0.75)" in text


HELP_AND_VERSION = """
import contextlib, io, json, sys
from sbert_keras.cli.parser import main
results = {}
for argv in json.loads(sys.argv[1]):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            main(argv)
        except SystemExit as stop:
            results[" ".join(argv)] = [stop.code, out.getvalue()]
print(json.dumps({"results": results, "imported": sorted({"tensorflow", "apache_beam"} & set(sys.modules))}))
"""


def clean_env():
    """A new user's environment: this checkout, no TensorFlow logging setting."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TF_CPP", "PYTHONPATH"))}
    return dict(env, PYTHONPATH=str(ROOT))


def test_every_help_and_version_print_no_warning_and_import_no_tensorflow():
    helps = [[], *[[name] for name in cli_parser.SUMMARIES], ["index", "build"], ["index", "search"]]
    argvs = [argv + ["--help"] for argv in helps] + [["--version"]]
    done = subprocess.run(
        [sys.executable, "-c", HELP_AND_VERSION, json.dumps(argvs)],
        env=clean_env(), cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0 and done.stderr == "", done.stderr  # no Beam, faiss or TensorFlow line
    report = json.loads(done.stdout)
    assert report["imported"] == []
    for argv, (code, out) in report["results"].items():
        assert code == 0 and out.startswith("usage: sbert-keras" if argv != "--version" else "sbert-keras"), argv
    assert report["results"]["--version"][1] == f"sbert-keras {sbert_keras.__version__}\n"
    done = subprocess.run(
        [sys.executable, "-m", "sbert_keras.cli", "--version"],
        env=clean_env(), cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert (done.returncode, done.stdout, done.stderr) == (0, f"sbert-keras {sbert_keras.__version__}\n", "")


BAD_FLAGS = """
import json, sys
from sbert_keras.cli.parser import main
codes = [main(argv) for argv in json.loads(sys.argv[1])]
print(json.dumps({"codes": codes, "tensorflow": "tensorflow" in sys.modules}))
"""


def test_bad_flags_are_one_line_naming_the_flag_before_tensorflow_or_the_model_loads(tmp_path):
    c, t = corpus_file(tmp_path), tmp_path
    (t / "old.npy").write_bytes(b"an earlier result")
    model = ["--model", str(t / "missing.keras")]  # never loaded: every error comes first
    missing = t / "nope.txt"
    agglomerative, community = ["--method", "agglomerative"], ["--method", "community"]
    cases = [
        (["cluster", "--input", c], "cluster: error: --num-clusters is required with --method kmeans."),
        (["cluster", "--input", c, "--num-clusters", "2", "--threshold", "0.5"], "does not apply to --method kmeans"),
        (["cluster", "--input", c, *agglomerative], "needs exactly one of --num-clusters or --threshold"),
        (["cluster", "--input", c, *agglomerative, "--threshold", "3"],
         "--threshold is a cosine distance (1 - cos) with --method agglomerative, between 0 and 2; received 3.0."),
        (["cluster", "--input", c, *community, "--threshold", "1.5"],
         "--threshold is a cosine similarity with --method community, between -1 and 1; received 1.5."),
        (["cluster", "--input", c, *community, "--num-clusters", "2"], "--num-clusters does not apply to --method"),
        (["encode", "--input", missing, "--output", t / "e.npy"], f"encode: error: --input {missing}: no such file."),
        (["encode", "--input", c, "--output", t / "e.npy", "--batch-size", "0"],
         "encode: error: --batch-size must be an integer >= 1; received 0."),
        (["encode", "--input", c, "--output", t / "old"],
         f"encode: error: --output {t / 'old.npy'} already exists; pass --overwrite to replace it."),
        (["search", "--corpus", c, "--query", "a", "--embeddings", missing], f"--embeddings {missing}: no such file."),
        (["evaluate"], "evaluate: error: give at least one of --sts, --triplets, --nli, --ir."),
        (["evaluate", "--sts", missing], f"evaluate: error: --sts {missing}: no such file."),
        (["evaluate", "--ir", c], f"evaluate: error: --ir {c} is a file; give a folder."),
        (["mine-negatives", "--pairs", c, "--output", t / "t.csv", "--range-max", "3", "--num-negatives", "5"],
         "--num-negatives 5 is more than the 3 ranks from --range-min 0 to --range-max 3"),
        (["train", "--objective", "cosent", "--train", c, "--output", t / "run", "--sequence-length", "0"],
         "train: error: --sequence-length must be an integer >= 1; received 0."),
        (["index", "search", "--index", t / "idx", "--query", "a"], f"--index {t / 'idx'}: no such folder."),
        (["embed-corpus", "--input", c, "--output", t / "emb", "--beam-batch-size", "0"],
         "embed-corpus: error: --beam-batch-size must be an integer >= 1; received 0."),
    ]  # fmt: skip
    argvs = [[str(a) for a in argv] + model for argv, _ in cases]
    done = subprocess.run(
        [sys.executable, "-c", BAD_FLAGS, json.dumps(argvs)],
        env=clean_env(), cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    report = json.loads(done.stdout)
    assert report == {"codes": [2] * len(cases), "tensorflow": False}, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == len(cases), done.stderr  # one line each, no status line: nothing was started
    for line, (argv, message) in zip(lines, cases):
        assert line.startswith(f"sbert-keras {argv[0]}: error: ") and message in line, (line, message)


def test_encode_refuses_to_replace_its_output_and_normalizes_as_told(capsys, tmp_path, encoder_file):
    lines = corpus_file(tmp_path)
    encode = ["encode", "--model", encoder_file, "--input", lines, "--compute", "float32"]
    run_cli(capsys, *encode, "--output", tmp_path / "unit.npy")  # the model's config: normalize=True
    err = run_cli_error(capsys, *encode, "--output", tmp_path / "unit.npy")
    assert err == f"sbert-keras encode: error: --output {tmp_path / 'unit.npy'} already exists; pass --overwrite " + (
        "to replace it."
    )
    assert np.linalg.norm(np.load(tmp_path / "unit.npy"), axis=1) == pytest.approx(1.0, abs=1e-5)
    run_cli(capsys, *encode, "--output", tmp_path / "raw.npy", "--no-normalize")
    raw = np.load(tmp_path / "raw.npy")
    assert not np.allclose(np.linalg.norm(raw, axis=1), 1.0, atol=1e-3)
    run_cli(capsys, *encode, "--output", tmp_path / "unit.npy", "--overwrite", "--normalize")
    np.testing.assert_allclose(
        np.load(tmp_path / "unit.npy"), raw / np.linalg.norm(raw, axis=1, keepdims=True), atol=1e-5
    )
    assert build_parser().parse_args(["encode", *map(str, encode), "--output", "x"][1:]).normalize is None


def test_one_id_convention_line_numbers_across_search_index_and_embed_corpus(capsys, tmp_path, encoder_file):
    lines = tmp_path / "corpus.txt"
    lines.write_text("\n".join([CORPUS[0], "", CORPUS[2], CORPUS[4], "  ", CORPUS[5]]) + "\n")  # blank lines 2 and 5
    expected = {CORPUS[0]: "1", CORPUS[2]: "3", CORPUS[4]: "4", CORPUS[5]: "6"}
    queries = [arg for text in expected for arg in ("--query", text)]
    model = ["--model", encoder_file]
    hits = run_cli(capsys, "search", *model, "--corpus", lines, *queries, "--top-k", 1)
    assert {h["query"]: h["hits"][0]["id"] for h in hits} == expected
    assert all(h["hits"][0]["text"] == h["query"] for h in hits)
    # The vectors `encode` saved (one row per line, blank lines too) give the same hits.
    encoded = run_cli(capsys, "encode", *model, "--input", lines, "--output", tmp_path / "corpus.npy")
    assert encoded["texts"] == 6
    again = run_cli(
        capsys, "search", *model, "--corpus", lines, *queries, "--top-k", 1, "--embeddings", tmp_path / "corpus.npy"
    )
    assert [h["hits"][0]["id"] for h in again] == [h["hits"][0]["id"] for h in hits]
    assert [h["hits"][0]["score"] for h in again] == pytest.approx([h["hits"][0]["score"] for h in hits], abs=1e-5)
    # A .npy of another file is refused before the model loads, naming both files.
    other = tmp_path / "other.txt"
    other.write_text("\n".join([*CORPUS, "a dog"]) + "\n")
    err = run_cli_error(capsys, "search", "--model", tmp_path / "none.keras", "--corpus", other, "--query", "a",
                        "--embeddings", encoded["output"])  # fmt: skip
    assert f"--embeddings {encoded['output']} holds 6 rows" in err and f"--corpus {other} has 7 lines" in err
    pytest.importorskip("faiss")
    run_cli(capsys, "index", "build", "--embeddings", encoded["output"], "--output", tmp_path / "idx", "--kind", "flat")
    assert index_search(capsys, tmp_path / "idx", encoder_file, queries) == expected
    pytest.importorskip("apache_beam")
    run_cli(capsys, "embed-corpus", *model, "--input", lines, "--output", tmp_path / "emb", "--direct_num_workers", 1)
    run_cli(capsys, "index", "build", "--embeddings", tmp_path / "emb", "--output", tmp_path / "idx2", "--kind", "flat")
    assert index_search(capsys, tmp_path / "idx2", encoder_file, queries) == expected


def index_search(capsys, index, model, queries):
    """`{query: its first hit's id}` of `sbert-keras index search`."""
    code = main(["index", "search", "--index", str(index), "--model", str(model), *queries, "--top-k", "1"])
    out = capsys.readouterr()
    assert code == 0, out.err[-2000:]
    return {r["query"]: r["hits"][0]["id"] for r in map(json.loads, out.out.splitlines())}


def test_status_lines_while_tensorflow_and_the_model_load_keep_stdout_json(tmp_path, encoder_file):
    lines = corpus_file(tmp_path)
    argv = ["encode", "--model", encoder_file, "--input", lines, "--output", tmp_path / "e.npy"]
    done = subprocess.run(
        [sys.executable, "-m", "sbert_keras.cli", *map(str, argv)],
        env=clean_env(), cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout)["texts"] == 6
    err = done.stderr.splitlines()
    assert err[0] == "sbert-keras: starting TensorFlow ..."  # before the seconds of TensorFlow's import
    assert re.fullmatch(r"sbert-keras: TensorFlow started in \d+\.\d s", err[1]), err
    assert f"sbert-keras: loading model {encoder_file} ..." in err
    assert any(re.fullmatch(r"sbert-keras: model loaded in \d+\.\d s", line) for line in err)


def test_export_prints_the_compute_path_it_used_and_what_clients_need(capsys, tmp_path, encoder_file):
    out = run_cli(capsys, "export", "--model", encoder_file, "--output", tmp_path / "sm")
    marker = json.loads((tmp_path / "sm" / atomic_io.MARKER).read_text())
    assert out["compute"] == marker["compute"] and out["compute"] in defaults.COMPUTES[1:]
    for facts in (out, marker):
        assert facts["client_requires"] == ["tensorflow", "tensorflow_text"]
        assert "import tensorflow_text" in facts["client_note"]
    out = run_cli(capsys, "export", "--model", encoder_file, "--output", tmp_path / "sm", "--overwrite",
                  "--compute", "float32")  # fmt: skip
    assert out["compute"] == "float32"


def test_docs_cli_has_a_section_per_command():
    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    for name in cli_parser.SUMMARIES:
        assert f"## `sbert-keras {name}`" in text, name


def test_train_with_limit_shows_the_epoch_total_and_logs_every_step(capsys, tmp_path, files, encoder_file):
    args = [
        "train", "--objective", "contrastive", "--model", encoder_file, "--train", files["triplets"],
        "--output", tmp_path / "run", "--batch-size", 3, "--epochs", 2, "--limit", 10,
    ]  # fmt: skip
    with pytest.warns(UserWarning, match="negatives unused"):
        assert main([str(a) for a in args]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["train_examples"] == 10
    rows = assert_run_folder(tmp_path / "run")
    steps = len(rows) // 2  # each epoch's: no-duplicate batches of 3 over 10 pairs
    assert steps >= 4 and [int(row["epoch"]) for row in rows] == [1] * steps + [2] * steps
    assert f"1/{steps}" in captured.err and f"{steps}/{steps}" in captured.err and "Unknown" not in captured.err


def test_the_run_readme_command_parses_back_to_the_same_arguments():
    argv = [
        "train", "--objective", "cosent", "--model", "m.keras", "--train", "t.csv", "--output", "runs/a b",
        "--matryoshka-dims", "8,4", "--quiet", "--lr", "3e-05", "--limit", "10", "--compute", "float32",
    ]  # fmt: skip
    args = build_parser().parse_args(argv)
    words = shlex.split(command_line(args))
    assert words[:2] == ["sbert-keras", "train"] and "--output" in words and "runs/a b" in words
    assert vars(build_parser().parse_args(words[1:])) == vars(args)


@pytest.mark.large
def test_ctrl_c_during_encode_or_train_is_one_line_and_leaves_no_output(tmp_path, files, encoder_file):
    lines = corpus_file(tmp_path)
    before = sorted(os.listdir(tmp_path))
    code, err = interrupt_when_paused(
        ["encode", "--model", encoder_file, "--input", lines, "--output", tmp_path / "e"], "e.npy"
    )
    assert (code, err.strip().splitlines()[-1]) == (130, "sbert-keras encode: interrupted") and "Traceback" not in err
    assert sorted(os.listdir(tmp_path)) == before  # no output, no temporary file
    out = tmp_path / "run"
    train = ["train", "--objective", "regression", "--model", encoder_file, "--train", files["sts"], "--output", out]
    code, err = interrupt_when_paused([*train, "--batch-size", "2", "--save-every", "1", "--quiet"], "weights-0-2.")
    assert (code, err.strip().splitlines()[-1]) == (130, "sbert-keras train: interrupted") and "Traceback" not in err
    assert not out.exists()  # only the resumable `run.partial` backup remains


FULL_DISK = """
import errno, sys
import numpy as np
def full(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")
np.save = full
from sbert_keras.utils import disk_space
disk_space.free_bytes = lambda path: 0
from sbert_keras.cli.parser import main
sys.exit(main(sys.argv[1:]))
"""


def test_a_full_disk_is_one_line_and_leaves_no_output(tmp_path, files, encoder_file):
    lines = corpus_file(tmp_path)
    before = sorted(os.listdir(tmp_path))
    for argv, name in (
        (["encode", "--model", encoder_file, "--input", lines, "--output", tmp_path / "e.npy"], "e.npy"),
        (["train", "--objective", "regression", "--model", encoder_file, "--train", files["sts"],
          "--output", tmp_path / "run", "--batch-size", "4", "--quiet"], "run"),
    ):  # fmt: skip
        done = subprocess.run(
            [sys.executable, "-c", FULL_DISK, *map(str, argv)],
            env=cli_env(), cwd=ROOT, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        last = done.stderr.strip().splitlines()[-1]
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
        assert last.startswith(f"sbert-keras {argv[0]}: error: ") and ("No space left" in last or "free" in last), last
        assert not (tmp_path / name).exists()
    assert not set(os.listdir(tmp_path)) - set(before) - {"run.partial"}  # no output; the resumable run at most
