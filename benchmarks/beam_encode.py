"""Corpus encoding on Apache Beam against single-process `encode`, on distinct SNLI sentences.

The texts: the premises and hypotheses of `snli_1.0_train_subset.jsonl`
(read with `sbert_keras.data.readers.read_nli`, unlabelled lines kept), deduplicated
in order of first appearance; the full run needs >= 100,000 of them.
all-MiniLM-L6-v2 embeds them twice, at the same precision and batch size:

  (a) single process: `encode` in a child process (load, warm-up on 64
      texts, then the timed pass), its embeddings saved to `.npy`;
  (b) Beam: `sbert_keras.integrations.beam.embed_corpus` on the DirectRunner with
      `--direct_num_workers W --direct_running_mode multi_processing`
      (default W = 2), from the text file to Parquet shards. Its time
      counts everything: pipeline start, the driver's probe of the model
      (for the embedding size), each worker's model load, reading and
      writing.

Reported: texts/s of both and their ratio (on (a)'s encode time alone and on
its total time with load), the peak RSS of the driver, of each Beam worker
(`VmHWM`, polled) and of the single process, and the max |diff| of the
embeddings matched by id (target: float32 <= 1e-5).

    .venv/bin/python benchmarks/beam_encode.py [--quick] [--workers 2] [--compute float32]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

common.silence_tensorflow()

NAME = "beam_encode"
FULL_MIN_TEXTS = 100_000
QUICK_TEXTS = 2_000
WARMUP_TEXTS = 64
FLOAT32_TARGET = 1e-5
SNLI = "data/snli/snli_1.0_train_subset.jsonl"


def distinct_snli_sentences(path, limit=None):
    """Premises then hypotheses of each pair, deduplicated, one line each."""
    from sbert_keras.data import readers

    pairs = readers.read_nli(path, skip_unlabeled=False)
    seen = {}
    for a, b in zip(pairs.sentence_a, pairs.sentence_b):
        for text in (a, b):
            text = " ".join(text.split())  # one line, no blank text
            if text:
                seen.setdefault(text, None)
    texts = list(seen)
    return texts[:limit] if limit else texts


def proc_peak_mb(pid):
    """`VmHWM` (peak RSS) of process `pid` in MiB, or None once it is gone."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


class ChildPeaks:
    """Polls the descendants of this process: `{pid: (command, peak RSS MiB)}`."""

    def __init__(self, interval=0.5):
        import psutil

        self.root, self.interval, self.peaks = psutil.Process(), interval, {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            for child in self.root.children(recursive=True):
                peak = proc_peak_mb(child.pid)
                if peak is None:
                    continue
                try:
                    command = " ".join(child.cmdline()[:4])
                except Exception:  # the child just ended
                    command = "?"
                old = self.peaks.get(child.pid, (command, 0.0))
                self.peaks[child.pid] = (old[0] if old[0] != "?" else command, max(old[1], peak))
            self._stop.wait(self.interval)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        return False


def run_single(texts_file, model_dir, out_npy, precision, batch_size):
    """(a) in this (child) process; prints one JSON line."""
    import numpy as np

    common.quiet_tf_python_logs()
    from sbert_keras import SentenceEncoder

    texts = Path(texts_file).read_text(encoding="utf-8").splitlines()
    with common.Timer() as total:
        encoder = SentenceEncoder.from_preset(model_dir)
        encoder.encode(texts[:WARMUP_TEXTS], batch_size=batch_size, compute=precision, show_progress=False)
        with common.Timer() as timed:
            vectors = encoder.encode(texts, batch_size=batch_size, compute=precision, show_progress=False)
        np.save(out_npy, vectors)
    print(
        json.dumps(
            {
                "texts": len(texts),
                "encode_seconds": timed.seconds,
                "total_seconds": total.seconds,
                "peak_rss_mb": common.peak_rss_mb(),
            }
        ),
        flush=True,
    )


def main():
    parser = common.base_parser(__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2, help="--direct_num_workers of the Beam run")
    parser.add_argument("--compute", default="float32", help="encode's precision in both runs")
    parser.add_argument("--batch-size", type=int, default=32, help="texts per forward pass in both runs")
    parser.add_argument("--beam-batch-size", type=int, default=1024, help="texts per Beam batch")
    parser.add_argument(
        "--worker-threads", type=int, default=None, help="TF intra-op threads per Beam worker (default: TF's)"
    )
    parser.add_argument("--limit", type=int, default=None, help="use the first N distinct sentences")
    parser.add_argument("--single", nargs=2, metavar=("TEXTS", "NPY"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    model_dir = common.model_path(NAME)
    if model_dir is None:
        return 0
    if args.single:
        run_single(args.single[0], str(model_dir), args.single[1], args.compute, args.batch_size)
        return 0
    paths = common.shared_files(NAME, SNLI)
    if paths is None:
        return 0
    # The Beam workers are new interpreters: they must import this checkout.
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(common.REPO_ROOT), os.environ.get("PYTHONPATH")]))
    texts = distinct_snli_sentences(paths[0], QUICK_TEXTS if args.quick else args.limit)
    common.emit(
        benchmark=NAME,
        kind="config",
        quick=args.quick,
        texts=len(texts),
        meets_100k=len(texts) >= FULL_MIN_TEXTS,
        workers=args.workers,
        precision=args.compute,
        batch_size=args.batch_size,
        beam_batch_size=args.beam_batch_size,
        worker_threads=args.worker_threads,
        cpus=len(os.sched_getaffinity(0)),
    )
    import numpy as np

    from sbert_keras.integrations import beam

    with tempfile.TemporaryDirectory(prefix="beam_encode-") as tmp:
        texts_file = os.path.join(tmp, "texts.txt")
        Path(texts_file).write_text("".join(t + "\n" for t in texts), encoding="utf-8")
        single_npy = os.path.join(tmp, "single.npy")
        command = [sys.executable, __file__, "--single", texts_file, single_npy]
        command += ["--compute", args.compute, "--batch-size", str(args.batch_size)]
        result = subprocess.run(command, stdout=subprocess.PIPE, text=True, check=True)
        single = json.loads(result.stdout.strip().splitlines()[-1])
        single_tps = len(texts) / single["encode_seconds"]
        common.emit(benchmark=NAME, kind="single_process", texts_per_second=single_tps, **single)

        pipeline_args = ["--direct_num_workers", str(args.workers), "--direct_running_mode", "multi_processing"]
        started = time.perf_counter()
        with ChildPeaks() as peaks:
            summary = beam.embed_corpus(
                str(model_dir),
                texts_file,
                os.path.join(tmp, "beam-out"),
                compute=args.compute,
                pipeline_args=pipeline_args,
                batch_size=args.batch_size,
                beam_batch_size=args.beam_batch_size,
                worker_threads=args.worker_threads,
            )
        seconds = time.perf_counter() - started
        ids, vectors = beam.read_embeddings(os.path.join(tmp, "beam-out"))
        reference = np.load(single_npy)
        rows = np.asarray([int(i) - 1 for i in ids])
        max_diff = float(np.abs(vectors - reference[rows]).max())
        workers = {
            pid: peak
            for pid, (cmd, peak) in peaks.peaks.items()
            if "sdk_worker_main" in cmd and "python" in os.path.basename(cmd.split()[0])
        }
        beam_tps = len(texts) / seconds
        common.emit(
            benchmark=NAME,
            kind="beam_direct_multi_processing",
            texts=summary["texts"],
            all_ids=sorted(rows.tolist()) == list(range(len(texts))),
            seconds=seconds,
            texts_per_second=beam_tps,
            shards=summary["shards"],
            driver_peak_rss_mb=common.peak_rss_mb(),
            worker_peak_rss_mb=sorted(workers.values()),
            max_abs_diff=max_diff,
            meets_float32_target=max_diff <= FLOAT32_TARGET if args.compute == "float32" else None,
            ratio_to_single_encode=beam_tps / single_tps,
            ratio_to_single_total=beam_tps / (len(texts) / single["total_seconds"]),
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
