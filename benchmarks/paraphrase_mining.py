"""Paraphrase mining of 10,000 sentences, end to end: encode + mine.

The texts: the distinct sentences of STS-B train, then dev, then distinct
SNLI premises of the training subset, until there are 10,000 (STS-B train
alone has 10,566 distinct sentences, so by default all come from it; see
`--size`). After loading
all-MiniLM-L6-v2 and a 64-text warm-up, we time `encoder.encode(texts,
batch_size=32)` (float32) + `paraphrase_mining(embeddings)` (top_k=100,
max_pairs=500,000, as sentence-transformers' defaults) and report seconds
and the peak RSS of the process. The peer (`peer/st_paraphrase.py`) does
the same with sentence-transformers' `encode` +
`util.paraphrase_mining_embeddings` in its own process; we report its
seconds and peak RSS, the speed ratio and how many of the top-100 pairs
agree.

    .venv/bin/python benchmarks/paraphrase_mining.py [--quick] [--peer-python PATH]
"""

import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

common.silence_tensorflow()

NAME = "paraphrase_mining"
BATCH_SIZE = 32
TOP = 100
FULL_SIZE = 10_000
QUICK_SIZE = 200


def mining_texts(sts_train, sts_dev, snli_train, size):
    """Distinct STS-B train + dev sentences, then distinct SNLI premises, `size` in all.

    Returns `(texts, sources)`, `sources` counting the texts taken from each
    file. STS-B train alone has 10,566 distinct sentences, so the default
    10,000 texts all come from it; a larger `--size` adds dev, then SNLI.
    """
    from sbert_keras.data import readers

    unique, sources = {}, {}

    def add(texts, source):
        for text in texts:
            if len(unique) >= size:
                return
            if text not in unique:
                unique[text] = None
                sources[source] = sources.get(source, 0) + 1

    for path, source in ((sts_train, "sts_train"), (sts_dev, "sts_dev")):
        if len(unique) < size:
            pairs = readers.read_sts(path)
            add(pairs.sentence_a + pairs.sentence_b, source)
    if len(unique) < size:
        # Only premises are used, so unlabeled lines are kept too.
        add(readers.read_nli(snli_train, skip_unlabeled=False).sentence_a, "snli_train_premises")
    return list(unique), sources


def main():
    parser = common.base_parser(__doc__.splitlines()[0])
    parser.add_argument(
        "--size", type=int, default=None, help=f"number of texts (default {FULL_SIZE}, {QUICK_SIZE} with --quick)"
    )
    args = parser.parse_args()
    paths = common.shared_files(
        NAME,
        "data/stsbenchmark/sts-train.csv",
        "data/stsbenchmark/sts-dev.csv",
        "data/snli/snli_1.0_train_subset.jsonl",
    )
    model_dir = common.model_path(NAME)
    if paths is None or model_dir is None:
        return 0

    import tensorflow as tf  # noqa: F401

    common.quiet_tf_python_logs()
    from sbert_keras import SentenceEncoder
    from sbert_keras import paraphrase_mining

    size = args.size or (QUICK_SIZE if args.quick else FULL_SIZE)
    texts, sources = mining_texts(*paths, size)
    encoder = SentenceEncoder.from_preset(str(model_dir))
    encoder.encode(texts[:64], batch_size=BATCH_SIZE, show_progress=False)
    rss_before = common.current_rss_mb()
    with common.Timer() as total:
        with common.Timer() as encode:
            embeddings = encoder.encode(texts, batch_size=BATCH_SIZE, show_progress=False)
        pairs = paraphrase_mining(embeddings)
    ours = dict(
        seconds=total.seconds,
        encode_seconds=encode.seconds,
        mining_seconds=total.seconds - encode.seconds,
        num_pairs=len(pairs),
        peak_rss_mb=common.peak_rss_mb(),
        ru_maxrss_mb=common.ru_maxrss_mb(),
        rss_before_mb=rss_before,
        top10=[[s, i, j] for s, i, j in pairs[:10]],
    )
    result = dict(
        benchmark=NAME,
        quick=args.quick,
        texts=len(texts),
        sources=sources,
        batch_size=BATCH_SIZE,
        top_k=100,
        max_pairs=500_000,
        ours=ours,
    )

    python, reason = common.peer_or_reason(args.peer_python)
    if python is None:
        result["peer"] = reason
    else:
        with tempfile.TemporaryDirectory() as tmp:
            texts_file = Path(tmp) / "texts.json"
            texts_file.write_text(json.dumps(texts), encoding="utf-8")
            try:
                peer = common.run_peer(
                    "st_paraphrase.py",
                    [
                        "--texts",
                        texts_file,
                        "--batch-size",
                        BATCH_SIZE,
                        "--top",
                        TOP,
                        "--model",
                        model_dir,
                    ],
                    python=python,
                )[-1]
            except common.PeerError as error:
                peer = None
                result.update(peer="failed", peer_error=str(error))
        if peer is not None:
            ours_top = {(i, j) for _, i, j in pairs[:TOP]}
            peer_top = {(i, j) for _, i, j in peer.pop("top_pairs")}
            result.update(
                peer=peer,
                speed_ratio_ours_over_peer=peer["seconds"] / total.seconds,
                peak_rss_ratio_ours_over_peer=ours["peak_rss_mb"] / peer["peak_rss_mb"],
                top100_agreement=len(ours_top & peer_top),
                top100_compared=min(len(ours_top), len(peer_top)),
            )
    common.emit(**result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
