"""The input of `embed-corpus`: text lines or JSON lines, with their ids.

Ids: a JSON line's `"id"` (string or integer, stored as a string); for plain
text the 1-based line number (`"7"`), or `"<file name>:<line>"` when the
input matches several files. Blank lines are skipped. Files are read through
Beam's `FileSystems` (local, GCS, S3, ...), as UTF-8 (`sbert_keras.data.readers`).

`scan_input` reads every record once before the pipeline starts: a bad line,
an empty input or two records with the same id (JSON `1` and `"1"` are both
`"1"`) fail before any model loads, naming the file and line; and the
record count sizes the output for a free-space check.
"""

import dataclasses
import json
import os

from apache_beam.io.filesystems import FileSystems

from sbert_keras.data import examples
from sbert_keras.data import readers
from sbert_keras.utils.defaults import INPUT_FORMATS

JSONL_SUFFIXES = (".jsonl", ".json", ".jsonl.gz", ".json.gz")
SAME_IDS = ' (ids are stored as strings: 1 and "1" are the same id)'


def match_input(pattern):
    """The files a path or glob matches; `FileNotFoundError` for none, `ValueError` if all are empty."""
    pattern = os.fspath(pattern)
    files = [m for result in FileSystems.match([pattern]) for m in result.metadata_list]
    files = sorted((m for m in files if not (m.path.endswith("/") or os.path.isdir(m.path))), key=lambda m: m.path)
    if not files:
        raise FileNotFoundError(f"--input {pattern}: no file matches (give a file or a glob such as 'dir/*.txt').")
    if all(m.size_in_bytes == 0 for m in files):
        raise ValueError(f"--input {pattern}: empty input ({len(files)} empty file(s)); nothing to encode.")
    return [m.path for m in files]


def is_jsonl(path, input_format="auto"):
    """Whether `path` is read as JSON lines (`auto`: by its ending)."""
    if input_format not in INPUT_FORMATS:
        raise ValueError(f"input_format must be one of {INPUT_FORMATS}, received {input_format!r}.")
    return input_format == "jsonl" or (input_format == "auto" and path.lower().endswith(JSONL_SUFFIXES))


def parse_jsonl_line(path, line_number, line):
    """`(id, text)` of one JSON line, or a `DataFormatError` naming file and line."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError as error:
        raise examples.DataFormatError(path, line_number, f"invalid JSON ({error})") from None
    if not isinstance(record, dict):
        raise examples.DataFormatError(path, line_number, f"expected a JSON object, found {type(record).__name__}")
    for key in ("id", "text"):
        if key not in record:
            raise examples.DataFormatError(
                path, line_number, f'missing key {key!r} (expected {{"id": ..., "text": ...}})'
            )
    text, key = record["text"], record["id"]
    if not isinstance(text, str):
        raise examples.DataFormatError(path, line_number, f"'text' is not a string: {text!r}")
    if isinstance(key, bool) or not isinstance(key, (str, int)):
        raise examples.DataFormatError(path, line_number, f"'id' is not a string or an integer: {key!r}")
    return str(key), text


def numbered_records(path, input_format="auto", id_prefix=""):
    """Yields `(line_number, id, text)` of one file; see `read_records`."""
    jsonl = is_jsonl(path, input_format)
    with FileSystems.open(path) as f:
        for line_number, raw in enumerate(iter(f.readline, b""), start=1):
            line = readers._decode_line(path, line_number, raw).removesuffix("\n").removesuffix("\r")
            if not line.strip():
                continue
            key, text = parse_jsonl_line(path, line_number, line) if jsonl else (f"{id_prefix}{line_number}", line)
            yield line_number, key, text


def read_records(path, input_format="auto", id_prefix=""):
    """Yields `(id, text)` of one file (UTF-8 as in `sbert_keras.data.readers`, `.gz` decompressed).

    Args:
        path: str. A file (local or any Beam file system).
        input_format: str. `"auto"` (JSON lines for `.jsonl`/`.json`),
            `"text"` or `"jsonl"`.
        id_prefix: str. Put before plain-text line numbers.

    Raises:
        sbert_keras.data.examples.DataFormatError: naming the file and 1-based line.
    """
    for _, key, text in numbered_records(path, input_format, id_prefix):
        yield key, text


def id_prefixes(files):
    """`{path: prefix}`: `""` for one file, else `"<file name>:"` (unique names)."""
    if len(files) == 1:
        return {files[0]: ""}
    names = [os.path.basename(path) for path in files]
    if len(set(names)) < len(names):
        names = files  # same base names in different folders: the full paths
    return {path: f"{name}:" for path, name in zip(files, names)}


@dataclasses.dataclass
class InputSummary:
    """What `scan_input` found.

    Args:
        texts: int. Records (non-blank lines).
        id_bytes: int. UTF-8 bytes of all ids.
    """

    texts: int = 0
    id_bytes: int = 0


def scan_input(files, input_format="auto"):
    """Reads every record of `files` once, as the pipeline will, before it runs.

    Ids are compared as the strings they are stored as, so JSON `1` and `"1"`
    are the same id. Only inputs with a JSON lines file keep the ids seen (in
    memory, one entry per record): plain-text ids (line numbers) are distinct.

    Args:
        files: list of str. The input files (`match_input`).
        input_format: str. See `read_records`.

    Returns:
        `InputSummary`.

    Raises:
        sbert_keras.data.examples.DataFormatError: a bad line, or a duplicate id
            (naming the file and line of both records).
        ValueError: only blank lines.
    """
    summary, prefixes = InputSummary(), id_prefixes(files)
    seen = {} if any(is_jsonl(path, input_format) for path in files) else None
    for number, path in enumerate(files):
        for line_number, key, _ in numbered_records(path, input_format, prefixes[path]):
            summary.texts += 1
            summary.id_bytes += len(key.encode("utf-8"))
            if seen is None:
                continue
            first = seen.setdefault(key, (number, line_number))
            if first != (number, line_number):
                where = f"{files[first[0]]}, line {first[1]}"
                raise examples.DataFormatError(path, line_number, f"duplicate id {key!r}, first at {where}{SAME_IDS}")
    if not summary.texts:
        raise ValueError(f"--input {', '.join(files)}: empty input (only blank lines); nothing to encode.")
    return summary
