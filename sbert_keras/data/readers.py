"""Readers for the SBERT training and evaluation data, as plain Python/NumPy.

Nothing here imports Keras or TensorFlow (`load_tfds_stsb` imports
`tensorflow_datasets` when called). Readers return the small dataclasses of
`sbert_keras.data.examples` (string lists and a NumPy label array): STS Benchmark
files (`read_sts`), SNLI/MultiNLI JSON lines (`read_nli`), triplet CSVs
(`read_triplets_csv`), labelled sentences (`read_labelled_sentences_csv`),
0/1-labelled pairs (`read_labelled_pairs_csv`), plain sentences
(`read_sentences`); the CSV readers share `iter_csv_columns`. A malformed record raises `DataFormatError` (a
`ValueError`) naming the file and its 1-based line; so does a file that is
not UTF-8 (Latin-1, UTF-16): every reader, the CLI's included, goes through
`iter_text_lines`. The records and the NLI conversions live in
`sbert_keras.data.examples`.
"""

import codecs
import csv
import json
import logging
import os

import numpy as np

from sbert_keras.data.examples import NLI_LABELS
from sbert_keras.data.examples import STS_SCORE_MAX
from sbert_keras.data.examples import DataFormatError
from sbert_keras.data.examples import LabelledSentences
from sbert_keras.data.examples import NLIPairs
from sbert_keras.data.examples import SentencePairs
from sbert_keras.data.examples import Sentences
from sbert_keras.data.examples import Triplets

logger = logging.getLogger(__name__)

TRIPLET_HEADERS = (("anchor", "positive", "negative"), ("sentence1", "sentence2", "sentence3"))
LABELLED_SENTENCE_HEADERS = (("text", "label"), ("sentence", "label"))
LABELLED_PAIR_HEADERS = (
    ("sentence1", "sentence2", "label"),
    ("text1", "text2", "label"),
    ("question1", "question2", "is_duplicate"),
)

_UTF16_32_BOMS = (codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)


def _decode_line(path, line_number, raw):
    """One raw line as `str`, or a `DataFormatError` saying why it is not UTF-8."""
    if line_number == 1:
        if raw.startswith(_UTF16_32_BOMS):
            raise DataFormatError(
                path, 1, "the file is UTF-16 or UTF-32 (it starts with a byte-order mark); save it as UTF-8"
            )
        raw = raw.removeprefix(codecs.BOM_UTF8)
    if b"\0" in raw:
        raise DataFormatError(
            path,
            line_number,
            "NUL bytes: the file is not UTF-8 text (UTF-16 without a byte-order mark?); save it as UTF-8",
        )
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        column = len(raw[: error.start].decode("utf-8")) + 1
        raise DataFormatError(
            path,
            line_number,
            f"byte 0x{raw[error.start]:02x} at column {column} is not valid UTF-8 (a Latin-1 or "
            "Windows-1252 file?); save the file as UTF-8",
        ) from None


def iter_text_lines(path, skip_empty=True, keep_ends=False):
    """Yields `(line_number, line)` of a UTF-8 text file; the one shared reader.

    Lines are decoded one at a time, so a byte that is not UTF-8 is reported
    with its 1-based line (a text-mode `open` reports a position within an
    8 kB chunk, without the line). A leading UTF-8 byte-order mark is dropped.

    Args:
        path: str or path-like. The file.
        skip_empty: bool. Skip lines that are empty (without their line end).
        keep_ends: bool. Keep each line's `"\\n"` / `"\\r\\n"` (what
            `csv.reader` wants); otherwise it is removed.

    Raises:
        DataFormatError: a UTF-16/UTF-32 file, a NUL byte, or bytes that are
            not UTF-8 (Latin-1, Windows-1252), naming the file and line.
        OSError: the file cannot be opened.

    Example:
    ```python
    for line_number, line in iter_text_lines("sentences.txt"):
        print(line_number, line)
    ```
    """
    with open(path, "rb") as f:
        for line_number, raw in enumerate(f, start=1):
            line = _decode_line(path, line_number, raw)
            stripped = line.removesuffix("\n").removesuffix("\r")
            if stripped or not skip_empty:
                yield line_number, line if keep_ends else stripped


def read_sts(path):
    """Reads a raw STS Benchmark file (`sts-train.csv`, `sts-dev.csv`).

    Each line holds tab-separated fields, with no quoting: genre, file,
    year, id, score (0..5), sentence1, sentence2, and on some lines two
    ignored source fields. Completely empty lines are skipped.

    Args:
        path: str or path-like. The UTF-8 file.

    Returns:
        `SentencePairs` with the raw float32 scores as labels.

    Raises:
        DataFormatError: a wrong field count, or a score not in [0, 5].

    Example:
    ```python
    dev = read_sts("stsbenchmark/sts-dev.csv")
    x, y = dev.as_tuple(), scale_sts_score(dev.labels)
    ```
    """
    sentence_a, sentence_b, labels = [], [], []
    for line_number, line in iter_text_lines(path):
        fields = line.split("\t")
        if len(fields) not in (7, 9):
            reason = f"expected 7 or 9 tab-separated fields, found {len(fields)}"
            raise DataFormatError(path, line_number, reason)
        try:
            score = float(fields[4])
        except ValueError:
            raise DataFormatError(path, line_number, f"score {fields[4]!r} is not a number") from None
        if not 0.0 <= score <= STS_SCORE_MAX:
            raise DataFormatError(path, line_number, f"score {score} is outside [0, {STS_SCORE_MAX:g}]")
        sentence_a.append(fields[5])
        sentence_b.append(fields[6])
        labels.append(score)
    return SentencePairs(sentence_a, sentence_b, np.asarray(labels, dtype="float32"))


def load_tfds_stsb(split="validation", data_dir=None):
    """Loads GLUE STS-B (`glue/stsb`) through `tensorflow_datasets`.

    Downloads the data on first use. The GLUE test split carries no labels
    (every label is -1), so only "train" and "validation" (with TFDS slicing
    such as "train[:10%]") are accepted.

    Args:
        split: str. "train" or "validation", optionally sliced.
        data_dir: str or None. The TFDS data directory; `None` for its default.

    Returns:
        `SentencePairs` with the raw float32 0..5 scores as labels.

    Raises:
        ValueError: the unlabeled "test" split, or an unknown split.
        ImportError: `tensorflow_datasets` is not installed.
    """
    base = split.split("[", 1)[0].strip()
    if base == "test":
        raise ValueError(
            'The GLUE STS-B "test" split has no labels (every label is -1); '
            'evaluate on split="validation" (the STS Benchmark dev set) instead.'
        )
    if base not in ("train", "validation"):
        raise ValueError(f'Unknown STS-B split {split!r}; expected "train" or "validation".')
    try:
        import tensorflow_datasets as tfds
    except ImportError as error:
        raise ImportError(
            "load_tfds_stsb needs tensorflow_datasets: `pip install tensorflow-datasets`, "
            "or download the STS Benchmark files and use read_sts(path)."
        ) from error
    columns = tfds.as_numpy(tfds.load("glue/stsb", split=split, batch_size=-1, data_dir=data_dir))
    a, b = ([v.decode("utf-8") for v in columns[key]] for key in ("sentence1", "sentence2"))
    return SentencePairs(a, b, np.asarray(columns["label"], dtype="float32"))


def read_nli(path, skip_unlabeled=True, limit=None):
    """Reads SNLI / MultiNLI JSON lines (`gold_label`, `sentence1`, `sentence2`).

    Lines whose `gold_label` is "-" (annotators reached no consensus) are
    skipped and counted; the count is logged at INFO level. Completely empty
    lines are skipped; other keys (parses, `pairID`, ...) are not read.

    Args:
        path: str or path-like. The UTF-8 `.jsonl` file.
        skip_unlabeled: bool. Skip "-" lines; if False keep them with label -1.
        limit: int or None. Stop after this many kept pairs; `num_skipped`
            then counts only the lines read up to that point.

    Returns:
        `NLIPairs` with int32 labels indexing `NLI_LABELS`.

    Raises:
        DataFormatError: invalid JSON, a missing or non-string field, or an unknown label.
    """
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be None or >= 0, received {limit}.")
    label_ids = {label: i for i, label in enumerate(NLI_LABELS)}
    sentence_a, sentence_b, labels = [], [], []
    num_skipped = 0
    for line_number, line in iter_text_lines(path):
        if limit is not None and len(labels) >= limit:
            break
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise DataFormatError(path, line_number, f"invalid JSON ({error})") from None
        if not isinstance(record, dict):
            raise DataFormatError(path, line_number, f"expected a JSON object, found {type(record).__name__}")
        for key in ("gold_label", "sentence1", "sentence2"):
            if key not in record:
                raise DataFormatError(path, line_number, f"missing key {key!r}")
            if not isinstance(record[key], str):
                raise DataFormatError(path, line_number, f"{key!r} is not a string: {record[key]!r}")
        gold = record["gold_label"]
        if gold == "-":
            if skip_unlabeled:
                num_skipped += 1
                continue
            label = -1
        elif gold in label_ids:
            label = label_ids[gold]
        else:
            reason = f"unknown gold_label {gold!r}; expected one of {NLI_LABELS} or '-'"
            raise DataFormatError(path, line_number, reason)
        sentence_a.append(record["sentence1"])
        sentence_b.append(record["sentence2"])
        labels.append(label)
    if skip_unlabeled:
        message = "%s: skipped %d pair(s) with gold_label '-' (no annotator consensus), kept %d."
        logger.info(message, os.fspath(path), num_skipped, len(labels))
    return NLIPairs(sentence_a, sentence_b, np.asarray(labels, dtype="int32"), num_skipped)


def _header_columns(path, header, headers):
    """Indices of the columns of the first of `headers` that the header row names."""
    names = [name.strip().lower() for name in header]
    for candidates in headers:
        if all(name in names for name in candidates):
            return [names.index(name) for name in candidates]
    expected = " or ".join(",".join(names) for names in headers)
    raise DataFormatError(path, 1, f"header {header} lacks the columns {expected}")


def iter_csv_columns(path, headers, roles):
    """Yields `(line_number, values)` per row of a CSV with a header; the one CSV reader.

    Args:
        path: str or path-like. The UTF-8 CSV file (fields may be quoted).
        headers: tuple of tuples of str. Accepted column names, in order of
            preference, in any case; other columns are ignored.
        roles: tuple of str. What each column holds, for error messages.

    Raises:
        DataFormatError: no usable header, a short row, an empty field or
            invalid CSV, naming the file and the row's first line.
    """
    lines = (line for _, line in iter_text_lines(path, skip_empty=False, keep_ends=True))
    reader = csv.reader(lines)
    row_start = 1  # The first line of the record being read.
    try:
        header = next(reader, None)
        if header is None:
            raise DataFormatError(path, 1, "empty file, expected a header row")
        columns = _header_columns(path, header, headers)
        row_start = reader.line_num + 1
        for row in reader:
            line_number, row_start = row_start, reader.line_num + 1
            if not row:
                continue
            if len(row) <= max(columns):
                reason = f"expected at least {max(columns) + 1} fields, found {len(row)}"
                raise DataFormatError(path, line_number, reason)
            values = [row[i] for i in columns]
            for role, value in zip(roles, values, strict=True):
                if not value.strip():
                    raise DataFormatError(path, line_number, f"empty {role} field")
            yield line_number, values
    except csv.Error as error:
        raise DataFormatError(path, row_start, f"invalid CSV ({error})") from None


def read_triplets_csv(path):
    """Reads a triplet CSV such as the Wikipedia-sections triplets.

    The header row names the columns `anchor,positive,negative` or, as in
    the original dataset, `Sentence1,Sentence2,Sentence3`, in any case;
    other columns are ignored. Fields may be quoted; empty rows are skipped.

    Args:
        path: str or path-like. The UTF-8 CSV file.

    Returns:
        `Triplets` with anchor, positive and negative lists.

    Raises:
        DataFormatError: no usable header, or a missing or empty field.
    """
    rows = [values for _, values in iter_csv_columns(path, TRIPLET_HEADERS, ("anchor", "positive", "negative"))]
    return Triplets(*([row[k] for row in rows] for k in range(3)))


def read_labelled_sentences_csv(path):
    """Reads sentences with a class each (batch-hard triplet training).

    The header names the columns `text,label` (or `sentence,label`), in any
    case; labels are any strings (class names or numbers), numbered in order
    of first appearance: `"1"` and `"1.0"` are different classes.

    Args:
        path: str or path-like. The UTF-8 CSV file.

    Returns:
        `LabelledSentences`.

    Raises:
        DataFormatError: no usable header, a short row or an empty field.

    Example:
    ```python
    read_labelled_sentences_csv("topics.csv").classes  # ["sports", "cooking", ...]
    ```
    """
    texts, labels, ids = [], [], {}
    for _, (text, label) in iter_csv_columns(path, LABELLED_SENTENCE_HEADERS, ("text", "label")):
        texts.append(text)
        labels.append(ids.setdefault(label.strip(), len(ids)))
    return LabelledSentences(texts, np.asarray(labels, dtype="int32"), list(ids))


def read_labelled_pairs_csv(path):
    """Reads sentence pairs labelled 1 (similar) or 0 (dissimilar), e.g. duplicate questions.

    The header names the columns `sentence1,sentence2,label`,
    `text1,text2,label` or (Quora) `question1,question2,is_duplicate`, in
    any case; other columns are ignored.

    Args:
        path: str or path-like. The UTF-8 CSV file.

    Returns:
        `SentencePairs` with float32 0/1 labels.

    Raises:
        DataFormatError: no usable header, an empty field, or a label that
            is not 0 or 1, naming the file and line.
    """
    a, b, labels = [], [], []
    for line_number, values in iter_csv_columns(
        path, LABELLED_PAIR_HEADERS, ("first sentence", "second sentence", "label")
    ):
        try:
            label = float(values[2])
        except ValueError:
            label = None
        if label not in (0.0, 1.0):
            raise DataFormatError(path, line_number, f"label {values[2]!r} is not 0 or 1")
        a.append(values[0])
        b.append(values[1])
        labels.append(label)
    return SentencePairs(a, b, np.asarray(labels, dtype="float32"))


def read_sentences(path):
    """Reads a text file of sentences, one per line; blank lines are skipped.

    Args:
        path: str or path-like. The UTF-8 file.

    Returns:
        `Sentences`.

    Raises:
        DataFormatError: a file that is not UTF-8, naming the line.
    """
    return Sentences([line for _, line in iter_text_lines(path) if line.strip()])
