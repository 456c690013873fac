"""Hard-negative mining: (anchor, positive) pairs to (anchor, positive, negative) triplets.

sentence-transformers' `mine_hard_negatives` (triplet output, no
cross-encoder), on the project's own search: the anchors and a corpus (by
default the positives) are encoded, each distinct anchor's nearest corpus
texts are found by cosine with `retrieval.semantic_search`, and negatives are
taken from them. The candidates of an anchor are, in ST's order:

1. the `range_max + P + 1` nearest distinct corpus texts (`P` the most
   positives of any anchor; the corpus
   is de-duplicated, so a text never comes twice), without the anchor's
   positives and without the anchor's own text (ST would keep the latter);
2. without those scoring above `positive_score - margin` (the lowest
   positive score of that anchor), above `positive_score -
   |positive_score| * relative_margin`, above `max_score` or below
   `min_score`;
3. of those left, ranks `range_min` to `range_max - 1` (0-based, counted
   after step 2, as ST counts them);
4. the `num_negatives` best (`sampling_strategy="top"`) or a seeded random
   sample of them (`"random"`), by descending score.

Every (anchor, positive) pair gets one triplet per negative of its anchor.
`write_triplets_csv` writes them atomically (`atomic_io.replace_atomically`)
as the `anchor,positive,negative` CSV that `readers.read_triplets_csv` reads
and the triplet objectives train on (CSV, not TSV: that reader, and the
CLI's file sniffing, take a tab-separated file for STS pairs);
`read_pairs_csv` reads the (anchor, positive) input. The mining itself is written here
because the project has no `datasets`/PyTorch dependency for ST's, and ST's
version needs a SentenceTransformer model.
"""

import csv
import dataclasses
import logging
import os

import numpy as np
from tqdm.auto import tqdm

from sbert_keras.data.readers import Triplets
from sbert_keras.data.readers import iter_csv_columns
from sbert_keras.retrieval.semantic_search import semantic_search
from sbert_keras.utils import atomic_io
from sbert_keras.utils.arrays import l2_normalize
from sbert_keras.utils.checks import check_positive_int
from sbert_keras.utils.checks import check_text_list
from sbert_keras.utils.defaults import ENCODE_BATCH_SIZE
from sbert_keras.utils.defaults import MINING_NUM_NEGATIVES
from sbert_keras.utils.defaults import MINING_SAMPLING_STRATEGIES

logger = logging.getLogger(__name__)

SAMPLING_STRATEGIES = MINING_SAMPLING_STRATEGIES
TRIPLET_HEADER = ("anchor", "positive", "negative")
# Header names of the (anchor, positive) columns `read_pairs_csv` accepts.
PAIR_HEADERS = (("anchor", "positive"), ("query", "positive"), ("sentence1", "sentence2"))
# Anchors searched at once: bounds the score matrix to chunk x corpus floats.
QUERY_CHUNK_SIZE = 1024


@dataclasses.dataclass
class MinedNegatives:
    """The triplets mined by `mine_hard_negatives`, with their scores.

    Args:
        triplets: `examples.Triplets`. One row per (anchor, positive, negative).
        positive_scores: np.ndarray of float32. Cosine of each row's anchor
            and positive.
        negative_scores: np.ndarray of float32. Cosine of each row's anchor
            and negative.
        num_short: int. Distinct anchors that got fewer than `num_negatives`
            negatives (none at all included).
    """

    triplets: Triplets
    positive_scores: np.ndarray
    negative_scores: np.ndarray
    num_short: int = 0

    def __len__(self):
        return len(self.triplets)


def _texts(values, name):
    """`values` as a list of non-empty str (`checks.check_text_list`)."""
    return check_text_list(values, name, allow_empty=False)


def _check_window(range_min, range_max, num_negatives, filtered, max_positives):
    """Checks the rank window; `range_max` defaults as in ST."""
    num_negatives = check_positive_int(num_negatives, "num_negatives")
    if isinstance(range_min, bool) or not isinstance(range_min, (int, np.integer)) or range_min < 0:
        raise ValueError(f"`range_min` must be an integer >= 0. Received {range_min!r}.")
    if range_max is None:
        range_max = range_min + num_negatives * (10 if filtered else 1) + max_positives
    range_max = check_positive_int(range_max, "range_max")
    if range_min >= range_max:
        raise ValueError(f"`range_min` ({range_min}) must be smaller than `range_max` ({range_max}).")
    if num_negatives > range_max - range_min:
        raise ValueError(
            f"Cannot mine {num_negatives} negatives per anchor: only {range_max - range_min} ranks lie between "
            f"`range_min={range_min}` and `range_max={range_max}`. Lower `num_negatives` or widen the range."
        )
    return int(range_min), range_max, num_negatives


def _unit(x):
    """`x` as float32 rows `(n, dim)`, L2-normalised."""
    return l2_normalize(np.asarray(x, dtype="float32").reshape(len(x), -1))


def _keep(score, positive_score, margin, relative_margin, max_score, min_score):
    """Whether a candidate passes the score filters (step 2)."""
    if margin is not None and score > positive_score - margin:
        return False
    if relative_margin is not None and score > positive_score - abs(positive_score) * relative_margin:
        return False
    if max_score is not None and score > max_score:
        return False
    return min_score is None or score >= min_score


def mine_hard_negatives(
    encoder,
    anchors,
    positives,
    corpus=None,
    range_min=0,
    range_max=None,
    margin=None,
    relative_margin=None,
    max_score=None,
    min_score=None,
    num_negatives=MINING_NUM_NEGATIVES,
    sampling_strategy=MINING_SAMPLING_STRATEGIES[0],
    seed=None,
    batch_size=ENCODE_BATCH_SIZE,
    show_progress=None,
):
    """Mines hard negatives for (anchor, positive) pairs with `encoder`.

    See the module docstring for the selection rules (ST's
    `mine_hard_negatives` with `output_format="triplet"`).

    Args:
        encoder: `SentenceEncoder`. Anything with `encode(texts, batch_size)`.
        anchors: list of str. The queries/anchors.
        positives: list of str. The positive of each anchor (an anchor may
            come several times with different positives).
        corpus: list of str or None. Candidate negatives, added to the
            positives; `None` uses the positives alone.
        range_min: int. Candidates ranked before this (0-based, after the
            score filters) are skipped, e.g. to avoid false negatives.
        range_max: int or None. Candidates from this rank on are not used.
            `None`: `range_min + num_negatives + max positives per anchor`,
            with `10 * num_negatives` when a score filter is set (ST's).
        margin: float or None. Keep a candidate only if its score is at most
            `positive_score - margin` (0 keeps those below the positive).
        relative_margin: float or None. Keep a candidate only if its score
            is at most `positive_score - |positive_score| * relative_margin`.
        max_score: float or None. Drop candidates scoring above this.
        min_score: float or None. Drop candidates scoring below this.
        num_negatives: int. Negatives per anchor (fewer when the window has
            fewer candidates; see `MinedNegatives.num_short`).
        sampling_strategy: str. `"top"`: the best candidates; `"random"`:
            a random sample of the window (seeded by `seed`).
        seed: int or None. Seed of `"random"` sampling.
        batch_size: int. Texts per forward pass.
        show_progress: bool or None. A progress bar over the search; `None`
            shows it for more than one chunk of 1,024 distinct anchors.

    Returns:
        `MinedNegatives`: the triplets (rows grouped by distinct anchor in
        order of first appearance, then by positive, then by descending
        negative score) and their scores.

    Raises:
        ValueError: `anchors` and `positives` of different lengths or
            empty, an empty text (named), or a bad window or strategy.

    Example:
    ```python
    mined = mine_hard_negatives(encoder, ["a dog runs"], ["the dog runs"], corpus=["a cat sleeps"])
    write_triplets_csv("triplets.csv", mined.triplets)
    ```
    """
    anchors, positives = _texts(anchors, "anchors"), _texts(positives, "positives")
    if len(anchors) != len(positives):
        raise ValueError(f"`anchors` and `positives` differ in length: {len(anchors)} and {len(positives)}.")
    if not anchors:
        raise ValueError("`anchors` is empty: hard-negative mining needs at least one (anchor, positive) pair.")
    if sampling_strategy not in SAMPLING_STRATEGIES:
        raise ValueError(f"`sampling_strategy` must be one of {SAMPLING_STRATEGIES}. Received {sampling_strategy!r}.")
    batch_size = check_positive_int(batch_size, "batch_size")
    corpus = list(dict.fromkeys(positives + ([] if corpus is None else _texts(corpus, "corpus"))))
    corpus_row = {text: i for i, text in enumerate(corpus)}
    pairs = {}  # distinct anchor -> its distinct positive rows, in order
    for anchor, positive in zip(anchors, positives):
        pairs.setdefault(anchor, dict())[corpus_row[positive]] = None
    max_positives = max(map(len, pairs.values()))
    filtered = any(x is not None for x in (margin, relative_margin, max_score))
    range_min, range_max, num_negatives = _check_window(range_min, range_max, num_negatives, filtered, max_positives)

    queries = list(pairs)
    query_vectors = _unit(encoder.encode(queries, batch_size=batch_size))
    corpus_vectors = _unit(encoder.encode(corpus, batch_size=batch_size))
    rng = np.random.default_rng(seed)
    depth = min(range_max + max_positives + 1, len(corpus))
    starts = range(0, len(queries), QUERY_CHUNK_SIZE)
    show = len(starts) > 1 if show_progress is None else show_progress
    rows, positive_scores, negative_scores, num_short = [], [], [], 0
    for start in tqdm(starts, desc="Mining hard negatives", disable=not show):
        chunk = query_vectors[start : start + QUERY_CHUNK_SIZE]
        hits = semantic_search(chunk, corpus_vectors, top_k=depth)
        for offset, query_hits in enumerate(hits):
            q = start + offset
            positive_rows = list(pairs[queries[q]])
            scores = corpus_vectors[positive_rows] @ query_vectors[q]
            lowest = float(scores.min())
            excluded = set(positive_rows) | {corpus_row.get(queries[q])}
            survivors = [
                hit
                for hit in query_hits
                if hit["corpus_id"] not in excluded
                and _keep(hit["score"], lowest, margin, relative_margin, max_score, min_score)
            ]
            window = survivors[range_min:range_max]
            if sampling_strategy == "random" and len(window) > num_negatives:
                picked = np.sort(rng.choice(len(window), size=num_negatives, replace=False))
                window = [window[i] for i in picked]
            chosen = window[:num_negatives]
            num_short += len(chosen) < num_negatives
            for positive_row, positive_score in zip(positive_rows, scores.tolist()):
                for hit in chosen:
                    rows.append((queries[q], corpus[positive_row], corpus[hit["corpus_id"]]))
                    positive_scores.append(positive_score)
                    negative_scores.append(hit["score"])
    if num_short:
        logger.info(
            "%d of %d anchors got fewer than %d negatives; widen range_max or relax the margins for more.",
            num_short,
            len(queries),
            num_negatives,
        )
    triplets = Triplets(*(list(column) for column in zip(*rows))) if rows else Triplets([], [], [])
    return MinedNegatives(
        triplets, np.asarray(positive_scores, "float32"), np.asarray(negative_scores, "float32"), num_short
    )


def _check_csv_text(text, item):
    """Refuses a text that `read_triplets_csv` could not read back as written."""
    if not isinstance(text, str):
        raise ValueError(f"{item} is {type(text).__name__} {text!r}, not a str.")
    if not text.strip():
        raise ValueError(f"{item} is empty or only whitespace; the triplet file cannot hold an empty field.")
    if "\0" in text:
        raise ValueError(f"{item} holds a NUL character, which a UTF-8 text file cannot carry.")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError(f"{item} is not valid Unicode text ({e.reason} at character {e.start}).") from None


def write_triplets_csv(path, triplets, overwrite=False):
    """Writes triplets as the CSV that `readers.read_triplets_csv` reads, atomically.

    A header `anchor,positive,negative`, then one row per triplet, quoted
    where a text holds a comma, a quote or a line break (`\\r` included), so
    every text reads back exactly; a text the reader would refuse (empty, a
    NUL character, a lone surrogate) is refused first, naming it. The file is written
    to a temporary name and moved into place (`atomic_io.replace_atomically`),
    so a killed run leaves no half-written file.

    Args:
        path: str or path-like. The CSV file.
        triplets: `examples.Triplets` (or `MinedNegatives`) with negatives.
        overwrite: bool. Replace an existing file.

    Returns:
        The absolute path written.

    Raises:
        ValueError: `path` exists and `overwrite` is False, a folder on the
            way is a file or not writable, the triplets lack negatives, or a
            text cannot be read back (named: `triplet 3 (positive)`).

    Example:
    ```python
    write_triplets_csv("triplets.csv", Triplets(["a dog"], ["the dog"], ["a car"]))
    sbert_keras.data.readers.read_triplets_csv("triplets.csv").negative  # ["a car"]
    ```
    """
    if isinstance(triplets, MinedNegatives):
        triplets = triplets.triplets
    if triplets.negative is None:
        raise ValueError("`triplets` has no negatives; a triplet file needs anchor, positive and negative.")
    path = atomic_io.check_writable(path, flag="path")
    if os.path.isdir(path):
        raise ValueError(f"path {path} is a folder; give a file name.")
    if os.path.exists(path) and not overwrite:
        raise ValueError(f"path {path} already exists; pass overwrite=True (--overwrite) to replace it.")
    rows = list(zip(triplets.anchor, triplets.positive, triplets.negative))
    for number, row in enumerate(rows):
        for role, text in zip(TRIPLET_HEADER, row):
            _check_csv_text(text, f"triplet {number} ({role})")
    os.makedirs(os.path.dirname(path), exist_ok=True)

    def write(temp):
        with open(temp, "w", encoding="utf-8", newline="") as f:
            writer = csv.writer(f, lineterminator="\n")
            # `csv` quotes a line break only if it is the line terminator: a bare `\r` must be quoted by hand.
            quoted = csv.writer(f, lineterminator="\n", quoting=csv.QUOTE_ALL)
            writer.writerow(TRIPLET_HEADER)
            for row in rows:
                (quoted if any("\r" in text for text in row) else writer).writerow(row)
            f.flush()
            os.fsync(f.fileno())

    return atomic_io.replace_atomically(write, path, ".csv")


def read_pairs_csv(path):
    """Reads (anchor, positive) pairs from a CSV, the input of `mine_hard_negatives`.

    The header names the columns `anchor,positive`, `query,positive` or
    `sentence1,sentence2` (any case; other columns, e.g. a `negative` of a
    triplet file, are ignored). Fields may be quoted; empty rows are skipped.

    Args:
        path: str or path-like. The UTF-8 CSV file.

    Returns:
        `examples.Triplets` with anchors and positives and `negative=None`.

    Raises:
        sbert_keras.data.examples.DataFormatError: no usable header, a short
            row, an empty field or invalid CSV, naming the file and line
            (`sbert_keras.data.readers.iter_csv_columns` reads the file).

    Example:
    ```python
    pairs = read_pairs_csv("pairs.csv")
    mined = mine_hard_negatives(encoder, pairs.anchor, pairs.positive)
    ```
    """
    rows = [values for _, values in iter_csv_columns(path, PAIR_HEADERS, ("anchor", "positive"))]
    return Triplets([row[0] for row in rows], [row[1] for row in rows])
