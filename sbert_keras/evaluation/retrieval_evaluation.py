"""Information-retrieval evaluation: NDCG, MRR, MAP, recall and accuracy at k.

sentence-transformers' `InformationRetrievalEvaluator` (cosine), with its
metric names and definitions so that figures compare directly (checked
against it in the tests). The evaluators here and in `pair_evaluation`
return a `dict` whose `"primary"` entry names the main metric (ST's
`primary_metric`) and whose other entries are floats; `EvaluationCallback.of`
logs the floats during `fit`.

`read_beir` reads a retrieval set in the BEIR layout (`corpus.jsonl`,
`queries.jsonl`, `qrels/<split>.tsv`), the format of the public IR sets.

Reused: the chunked top-k corpus search is `search.semantic_search`, the
de-duplicated encoding `evaluation._encode_unique`, NDCG@k scikit-learn's
`ndcg_score`. Written here: MRR@k, MAP@k and precision/recall/accuracy@k
with several relevant documents per query. scikit-learn's ranking metrics
(`top_k_accuracy_score`, `label_ranking_average_precision_score`) take one
label per sample or a full queries x corpus score matrix, and its
`average_precision_score` has no cut-off and divides by every relevant
document, where IR's MAP@k divides by `min(k, relevant)` and stops at k.
"""

import collections.abc
import json
import os

import numpy as np
from sklearn.metrics import ndcg_score

from sbert_keras.data.readers import DataFormatError
from sbert_keras.data.readers import iter_text_lines
from sbert_keras.evaluation.evaluators import _encode_unique
from sbert_keras.retrieval.semantic_search import semantic_search
from sbert_keras.utils.checks import check_positive_int
from sbert_keras.utils.checks import check_text_list
from sbert_keras.utils.defaults import ENCODE_BATCH_SIZE

PRIMARY = "primary"
CUTOFFS = ("accuracy_at_k", "precision_recall_at_k", "mrr_at_k", "ndcg_at_k", "map_at_k")


# === Checks ===


def _texts(values, name):
    """`values` as a list of str (`checks.check_text_list`)."""
    return check_text_list(values, name)


def _text_map(values, name):
    """A dict id -> text from a mapping (kept) or a list (ids 0..n-1)."""
    if isinstance(values, collections.abc.Mapping):
        ids = list(values)
        return dict(zip(ids, _texts([values[i] for i in ids], name)))
    return dict(enumerate(_texts(values, name)))


def _ks(values, name):
    values = sorted({check_positive_int(k, name) for k in values})
    if not values:
        raise ValueError(f"`{name}` must name at least one k.")
    return values


# === Information retrieval ===


def _relevance(queries, corpus, relevant):
    """Query ids with relevant documents, their texts and relevant-id sets."""
    if not isinstance(relevant, collections.abc.Mapping):
        raise TypeError(f"`relevant` must be a dict query id -> set of corpus ids. Received {type(relevant).__name__}.")
    for qid, docs in relevant.items():
        if qid not in queries:
            raise ValueError(f"`relevant` names query id {qid!r}, which is not in `queries`.")
        if isinstance(docs, (str, bytes)):
            raise TypeError(f"`relevant[{qid!r}]` must be a set of corpus ids, not the string {docs!r}.")
        for doc in docs:
            if doc not in corpus:
                raise ValueError(f"`relevant[{qid!r}]` names corpus id {doc!r}, which is not in `corpus`.")
    query_ids = [qid for qid in queries if relevant.get(qid)]
    if not query_ids:
        raise ValueError("No query of `queries` has a relevant document in `relevant`; nothing to evaluate.")
    return query_ids, [set(relevant[qid]) for qid in query_ids]


def _hit_matrix(query_embeddings, corpus_embeddings, relevant_rows, max_k, corpus_chunk_size):
    """`(queries, max_k)` bools: is the corpus row at each rank relevant."""
    hits = semantic_search(query_embeddings, corpus_embeddings, top_k=max_k, corpus_chunk_size=corpus_chunk_size)
    matrix = np.zeros((len(hits), max_k), dtype=bool)
    for q, (row, wanted) in enumerate(zip(hits, relevant_rows)):
        matrix[q, : len(row)] = [hit["corpus_id"] in wanted for hit in row]
    return matrix


def _ndcg(hits, num_relevant, k):
    """ST's binary-relevance NDCG@k through scikit-learn's `ndcg_score`.

    Each row lists the retrieved documents' relevance, then one for each
    relevant document that was not retrieved (so that the ideal DCG counts
    it), by strictly decreasing score: the ranking is the retrieval order.
    """
    width = hits.shape[1] + int(num_relevant.max())
    y_true = np.zeros((len(hits), width))
    y_true[:, : hits.shape[1]] = hits
    for q, missing in enumerate(num_relevant - hits.sum(axis=1)):
        y_true[q, hits.shape[1] : hits.shape[1] + missing] = 1.0
    y_score = np.broadcast_to(-np.arange(width, dtype="float64"), y_true.shape)
    return float(ndcg_score(y_true, y_score, k=k, ignore_ties=True))


def retrieval_metrics(
    hits,
    num_relevant,
    accuracy_at_k=(1, 3, 5, 10),
    precision_recall_at_k=(1, 3, 5, 10),
    mrr_at_k=(10,),
    ndcg_at_k=(10,),
    map_at_k=(100,),
):
    """ST's information-retrieval metrics from a ranked hit matrix.

    Args:
        hits: array-like of bool `(queries, depth)`. Whether the document
            retrieved at each rank is relevant (`depth` >= every k; ranks
            past the corpus are `False`).
        num_relevant: array-like of int `(queries,)`. Relevant documents of
            each query (>= 1).
        accuracy_at_k, precision_recall_at_k, mrr_at_k, ndcg_at_k, map_at_k:
            tuple of int. The cut-offs of each metric.

    Returns:
        dict of float: `cosine_accuracy@k`, `cosine_precision@k`,
        `cosine_recall@k`, `cosine_mrr@k`, `cosine_ndcg@k`, `cosine_map@k`,
        each averaged over the queries.

    Example:
    ```python
    out = retrieval_metrics([[False, True, False]], [2], (1,), (2,), (3,), (3,), (3,))
    out["cosine_mrr@3"]  # 0.5
    ```
    """
    hits = np.atleast_2d(np.asarray(hits, dtype=bool))
    num_relevant = np.asarray(num_relevant, dtype="int64").reshape(-1)
    cutoffs = [accuracy_at_k, precision_recall_at_k, mrr_at_k, ndcg_at_k, map_at_k]
    accuracy_at_k, precision_recall_at_k, mrr_at_k, ndcg_at_k, map_at_k = map(_ks, cutoffs, CUTOFFS)
    depth = max(max(ks) for ks in (accuracy_at_k, precision_recall_at_k, mrr_at_k, ndcg_at_k, map_at_k))
    if hits.shape[1] < depth:
        raise ValueError(f"`hits` ranks {hits.shape[1]} documents per query; the largest k needs {depth}.")
    if len(num_relevant) != len(hits) or num_relevant.min(initial=1) < 1 or (hits.sum(1) > num_relevant).any():
        raise ValueError("`num_relevant` must give each query's relevant documents: >= 1 and >= its hits.")
    ranks = np.arange(1, hits.shape[1] + 1)
    found = np.cumsum(hits, axis=1)
    out = {}
    for k in accuracy_at_k:
        out[f"cosine_accuracy@{k}"] = float(np.mean(hits[:, :k].any(axis=1)))
    for k in precision_recall_at_k:
        out[f"cosine_precision@{k}"] = float(np.mean(found[:, k - 1] / k))
        out[f"cosine_recall@{k}"] = float(np.mean(found[:, k - 1] / num_relevant))
    for k in mrr_at_k:
        first = np.where(hits[:, :k].any(axis=1), 1.0 / (hits[:, :k].argmax(axis=1) + 1), 0.0)
        out[f"cosine_mrr@{k}"] = float(np.mean(first))
    for k in ndcg_at_k:
        out[f"cosine_ndcg@{k}"] = _ndcg(hits[:, :k], num_relevant, k)
    for k in map_at_k:
        precision_at_hits = np.sum(hits[:, :k] * found[:, :k] / ranks[:k], axis=1)
        out[f"cosine_map@{k}"] = float(np.mean(precision_at_hits / np.minimum(k, num_relevant)))
    return out


def information_retrieval_evaluation(
    encoder,
    queries,
    corpus,
    relevant,
    batch_size=ENCODE_BATCH_SIZE,
    accuracy_at_k=(1, 3, 5, 10),
    precision_recall_at_k=(1, 3, 5, 10),
    mrr_at_k=(10,),
    ndcg_at_k=(10,),
    map_at_k=(100,),
    corpus_chunk_size=50_000,
):
    """Ranks the corpus for each query by cosine; NDCG, MRR, MAP, recall.

    sentence-transformers' `InformationRetrievalEvaluator` (binary
    relevance): queries without relevant documents are skipped, documents on
    an equal score rank by ascending corpus id (by insertion order if the
    ids do not sort), and a relevant document outside the retrieved depth
    (the largest k) counts as not found.

    Args:
        encoder: `SentenceEncoder`. Anything with `encode(texts, batch_size)`.
        queries: dict. Query id -> query text.
        corpus: dict. Corpus id -> document text.
        relevant: dict. Query id -> set of relevant corpus ids.
        batch_size: int. Texts per forward pass.
        accuracy_at_k, precision_recall_at_k, mrr_at_k, ndcg_at_k, map_at_k:
            tuple of int. The cut-offs of each metric.
        corpus_chunk_size: int. Corpus rows scored at once.

    Returns:
        dict: `"primary"` (`"cosine_ndcg@10"`, the largest NDCG cut-off)
        and the floats `cosine_accuracy@k`, `cosine_precision@k`,
        `cosine_recall@k`, `cosine_mrr@k`, `cosine_ndcg@k`, `cosine_map@k`.

    Raises:
        ValueError: an empty corpus, no query with relevant documents, or an
            id in `relevant` that is not in `queries` / `corpus` (named).

    Example:
    ```python
    out = information_retrieval_evaluation(
        encoder, {"q1": "a dog runs"}, {"d1": "the dog runs", "d2": "a red car"}, {"q1": {"d1"}}
    )
    out[out["primary"]]  # NDCG@10
    ```
    """
    batch_size = check_positive_int(batch_size, "batch_size")
    queries, corpus = _text_map(queries, "queries"), _text_map(corpus, "corpus")
    if not corpus:
        raise ValueError("`corpus` is empty: information retrieval needs at least one document.")
    query_ids, relevant_ids = _relevance(queries, corpus, relevant)
    cutoffs = [accuracy_at_k, precision_recall_at_k, mrr_at_k, ndcg_at_k, map_at_k]
    max_k = max(max(_ks(ks, name)) for ks, name in zip(cutoffs, CUTOFFS))
    try:  # ST breaks score ties by corpus id: search in id order.
        corpus_ids = sorted(corpus)
    except TypeError:
        corpus_ids = list(corpus)
    query_vectors, corpus_vectors = _encode_unique(
        encoder, [[queries[q] for q in query_ids], [corpus[c] for c in corpus_ids]], batch_size
    )
    row = {cid: i for i, cid in enumerate(corpus_ids)}
    relevant_rows = [{row[cid] for cid in ids} for ids in relevant_ids]
    hits = _hit_matrix(query_vectors, corpus_vectors, relevant_rows, max_k, corpus_chunk_size)
    out = retrieval_metrics(hits, [len(ids) for ids in relevant_rows], *cutoffs)
    return {PRIMARY: f"cosine_ndcg@{max(_ks(ndcg_at_k, 'ndcg_at_k'))}", **out}


# === BEIR files ===


def _read_jsonl_texts(path, with_title):
    """id -> text of a BEIR `corpus.jsonl` / `queries.jsonl` (title + text)."""
    texts = {}
    for line_number, line in iter_text_lines(path):
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise DataFormatError(path, line_number, f"invalid JSON ({error})") from None
        if not isinstance(record, dict) or "_id" not in record or not isinstance(record.get("text"), str):
            raise DataFormatError(path, line_number, 'expected an object with "_id" and a string "text"')
        title = record.get("title") if with_title else None
        text = f"{title} {record['text']}".strip() if isinstance(title, str) else record["text"]
        texts[str(record["_id"])] = text
    return texts


def read_beir(folder, split="test"):
    """Reads an IR set in the BEIR layout for `information_retrieval_evaluation`.

    `corpus.jsonl` (`_id`, optional `title`, `text`: the document is
    `title + " " + text`, as ST's examples build it), `queries.jsonl`
    (`_id`, `text`) and `qrels/<split>.tsv` (a header, then `query-id`,
    `corpus-id`, `score` separated by tabs; a score > 0 is relevant).

    Args:
        folder: str or path-like. The folder holding the three files.
        split: str. The qrels file to read (`test`, `dev`, `train`).

    Returns:
        `(queries, corpus, relevant)`: dict id -> text, dict id -> text and
        dict query id -> set of corpus ids, all ids as str.

    Raises:
        DataFormatError: a malformed line or an id that is in neither
            file, naming the file and line.
        FileNotFoundError: a missing file.

    Example:
    ```python
    queries, corpus, relevant = read_beir("scifact", split="test")
    information_retrieval_evaluation(encoder, queries, corpus, relevant)
    ```
    """
    corpus = _read_jsonl_texts(os.path.join(folder, "corpus.jsonl"), with_title=True)
    queries = _read_jsonl_texts(os.path.join(folder, "queries.jsonl"), with_title=False)
    path = os.path.join(folder, "qrels", f"{split}.tsv")
    relevant = {}
    for line_number, line in iter_text_lines(path):
        fields = line.split("\t")
        if line_number == 1 and fields[0].strip().lower() in ("query-id", "query_id", "qid"):
            continue  # the header
        if len(fields) < 3:
            raise DataFormatError(path, line_number, f"expected query-id, corpus-id and score; found {fields}")
        qid, cid = fields[0].strip(), fields[1].strip()
        try:
            score = float(fields[2])
        except ValueError:
            raise DataFormatError(path, line_number, f"score {fields[2]!r} is not a number") from None
        for name, value, known in (("query", qid, queries), ("corpus", cid, corpus)):
            if value not in known:
                raise DataFormatError(path, line_number, f"{name} id {value!r} is not in the {name} file")
        if score > 0:
            relevant.setdefault(qid, set()).add(cid)
    return queries, corpus, relevant
