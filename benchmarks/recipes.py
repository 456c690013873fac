"""Training recipes on all-MiniLM-L6-v2, scored on STS-B dev.

Four recipes, each printing one JSON line per trained model (`recipe`,
`objective`, `epochs`, `batch_size`, `precision`, `seconds`, STS-B dev
Spearman before and after; the STS-B test split stays withheld):

- `a`: regression vs CoSENT vs AnglE on STS-B train, same settings
  (`--epochs`, default 1; batch 16, lr 2e-5, 10 % warmup, `--seed`, 0);
- `b`: the SBERT paper's two stages: in-batch negatives (`contrastive`,
  the contradictions as hard negatives) on SNLI triplets, batch 64, then
  STS-B with `--stage2-objective` (cosent) for `--stage2-epochs` (1);
- `c`: Matryoshka (`matryoshka_dims=(384, 256, 128, 64)`) vs the same
  objective without it; dev Spearman at each dimension (the embeddings are
  truncated and re-normalised here);
- `d`: cached in-batch negatives (`CachedContrastiveSiamese`, batch 512,
  mini-batch 32) vs plain `ContrastiveSiamese` batch 64 on the same SNLI
  triplets, each in a fresh subprocess: dev Spearman and its peak RSS.

Hand-written here rather than reused: only the glue (the recipes are
calls of `train_objective` and the siamese models) and the per-dimension
scoring (the vectors of one `encode` pass, cut to each size: what
`encode(truncate_dim=...)` returns, without encoding the dev set four times).

    .venv/bin/python benchmarks/recipes.py --recipe a|b|c|d|all [--quick]
"""

import argparse
import dataclasses
import json
import subprocess
import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

common.silence_tensorflow()

import numpy as np  # noqa: E402

common.quiet_tf_python_logs()

from sbert_keras import CachedContrastiveSiamese  # noqa: E402
from sbert_keras import ContrastiveSiamese  # noqa: E402
from sbert_keras import SentenceEncoder  # noqa: E402
from sbert_keras import set_compute  # noqa: E402
from sbert_keras import sts_evaluation  # noqa: E402
from sbert_keras import train_objective  # noqa: E402
from sbert_keras.data import examples  # noqa: E402
from sbert_keras.data import readers  # noqa: E402
from sbert_keras.training.pipelines import siamese_dataset  # noqa: E402
from sbert_keras.training.schedules import paper_optimizer  # noqa: E402
from sbert_keras.training.trainer import seed_everything  # noqa: E402
from sbert_keras.utils.defaults import CLIP_NORM  # noqa: E402
from sbert_keras.utils.defaults import WEIGHT_DECAY  # noqa: E402

NAME = "recipes"
STS_TRAIN, STS_DEV = "data/stsbenchmark/sts-train.csv", "data/stsbenchmark/sts-dev.csv"
SNLI_TRAIN = "data/snli/snli_1.0_train_subset.jsonl"
TARGET_SPEARMAN = 0.900
TARGET_DIM_RETENTION = 0.97  # Matryoshka: score at 128 dims / score at full size
TARGET_PEAK_RSS_MB = 24 * 1024
BATCH, LR, WARMUP = 16, 2e-5, 0.1


@dataclasses.dataclass
class Setup:
    """What every recipe needs.

    Args:
        make_encoder: callable. Returns a fresh (pretrained) `SentenceEncoder`.
        sts_train: `examples.SentencePairs`. STS-B train (0-5 scores).
        sts_dev: `examples.SentencePairs`. STS-B dev.
        triplets: `examples.Triplets`. SNLI (premise, entailment, contradiction).
        precision: str. The precision word `set_compute` returned.
        epochs: int. STS-B epochs of recipes a and c.
        dims: tuple of int. Matryoshka dimensions, largest first.
        snli_batch: int. Batch of the in-batch-negatives stage (b, plain d).
        cached_batch: tuple. `(batch, mini_batch)` of the cached run (d).
        stage2_objective: str. STS-B objective of recipe b's second stage.
        stage2_epochs: int. Its epochs.
        c_objective: str. Objective of recipe c.
        seed: int. The seed of every run (`trainer.seed_everything`).
    """

    make_encoder: object
    sts_train: object
    sts_dev: object
    triplets: object
    precision: str = "float32"
    epochs: int = 1
    dims: tuple = (384, 256, 128, 64)
    snli_batch: int = 64
    cached_batch: tuple = (512, 32)
    stage2_objective: str = "cosent"
    stage2_epochs: int = 1
    c_objective: str = "cosent"
    seed: int = 0


class _Truncated:
    """An `encode` that returns the first `dim` components, from one cached pass."""

    def __init__(self, encoder, dim, cache):
        self.encoder, self.dim, self.cache = encoder, dim, cache

    def encode(self, texts, batch_size=32):
        key = tuple(texts)
        if key not in self.cache:
            self.cache[key] = np.asarray(self.encoder.encode(list(texts), batch_size=batch_size))
        return self.cache[key][:, : self.dim]  # sts_evaluation re-normalises (cosine)


def dev_spearman(encoder, dev, dims=None):
    """STS-B dev Spearman (cosine); with `dims`, `(full, {dim: spearman})` of truncated vectors."""
    if not dims:
        return sts_evaluation(encoder, dev.sentence_a, dev.sentence_b, dev.labels)["spearman_cosine"]
    cache, by_dim = {}, {}
    for dim in dims:
        result = sts_evaluation(_Truncated(encoder, dim, cache), dev.sentence_a, dev.sentence_b, dev.labels)
        by_dim[dim] = result["spearman_cosine"]
    return by_dim[dims[0]], by_dim


def fit_sts(setup, encoder, objective, epochs, **model_kwargs):
    """`train_objective` on STS-B train with the paper's settings; `(seconds, final loss)`."""
    timer = common.fit_timer()
    _, history = train_objective(
        objective,
        encoder,
        setup.sts_train,
        epochs=epochs,
        batch_size=BATCH,
        learning_rate=LR,
        warmup_fraction=WARMUP,
        seed=setup.seed,
        callbacks=[timer],
        verbose=0,
        **model_kwargs,
    )
    return timer.summary()["fit_seconds"], common.last_history(history).get("loss")


def _row(setup, recipe, **fields):
    """A result line: the recipe, the shared settings, then `fields`."""
    row = dict(benchmark=NAME, recipe=recipe, precision=setup.precision, seed=setup.seed, batch_size=BATCH)
    row.update(learning_rate=LR, weight_decay=WEIGHT_DECAY, clip_norm=CLIP_NORM)
    row.update(train_pairs=len(setup.sts_train), dev_pairs=len(setup.sts_dev))
    return {**row, **fields}


def recipe_a(setup, objectives=("regression", "cosent", "angle")):
    """Regression vs CoSENT vs AnglE: yields one row per objective, as it finishes."""
    for objective in objectives:
        encoder = setup.make_encoder()
        before = dev_spearman(encoder, setup.sts_dev)
        seconds, loss = fit_sts(setup, encoder, objective, setup.epochs)
        row = _row(setup, "a", objective=objective, epochs=setup.epochs, seconds=seconds, final_loss=loss)
        yield {**row, "dev_spearman_before": before, "dev_spearman": dev_spearman(encoder, setup.sts_dev)}


def in_batch_stage(setup, encoder, triplets):
    """Stage 1 of recipe b: `contrastive` (hard negatives) on SNLI triplets; `(seconds, loss)`."""
    timer = common.fit_timer()
    _, history = train_objective(
        "contrastive", encoder, triplets, batch_size=setup.snli_batch, learning_rate=LR, warmup_fraction=WARMUP,
        seed=setup.seed, callbacks=[timer], verbose=0, hard_negatives=True,
    )  # fmt: skip
    return timer.summary()["fit_seconds"], common.last_history(history).get("loss")


def recipe_b(setup):
    """SNLI in-batch negatives, then STS-B: yields one row with both stages."""
    encoder = setup.make_encoder()
    before = dev_spearman(encoder, setup.sts_dev)
    seconds_1, loss_1 = in_batch_stage(setup, encoder, setup.triplets)
    after_1 = dev_spearman(encoder, setup.sts_dev)
    seconds_2, loss_2 = fit_sts(setup, encoder, setup.stage2_objective, setup.stage2_epochs)
    row = _row(setup, "b", objective=f"contrastive(SNLI) -> {setup.stage2_objective}(STS-B)")
    row.update(snli_triplets=len(setup.triplets.anchor), stage1_batch_size=setup.snli_batch, stage1_epochs=1)
    row.update(stage1_hard_negatives=True)
    row.update(stage1_seconds=seconds_1, stage1_final_loss=loss_1, dev_spearman_after_stage1=after_1)
    row.update(epochs=setup.stage2_epochs, stage2_seconds=seconds_2, stage2_final_loss=loss_2)
    row.update(seconds=seconds_1 + seconds_2, dev_spearman_before=before)
    yield {**row, "dev_spearman": dev_spearman(encoder, setup.sts_dev)}


def recipe_c(setup):
    """Matryoshka vs plain, same objective: yields the dev Spearman at each of `setup.dims`, then a summary."""
    rows = []
    for matryoshka in (False, True):
        encoder = setup.make_encoder()
        kwargs = {"matryoshka_dims": setup.dims} if matryoshka else {}
        seconds, loss = fit_sts(setup, encoder, setup.c_objective, setup.epochs, **kwargs)
        full, by_dim = dev_spearman(encoder, setup.sts_dev, setup.dims)
        row = _row(setup, "c", objective=setup.c_objective, matryoshka=matryoshka, dims=list(setup.dims))
        row.update(epochs=setup.epochs, seconds=seconds, final_loss=loss, dev_spearman=full)
        row.update(dev_spearman_by_dim=by_dim, retention_by_dim={d: score / full for d, score in by_dim.items()})
        rows.append(row)
        yield row
    dim = 128 if 128 in setup.dims else setup.dims[-2]
    kept = rows[1]["retention_by_dim"][dim]
    yield dict(
        benchmark=NAME, recipe="c", summary=True, dim=dim, retention_matryoshka=kept,
        retention_plain=rows[0]["retention_by_dim"][dim], target=f">= {TARGET_DIM_RETENTION}",
        meets_target=bool(kept >= TARGET_DIM_RETENTION),
    )  # fmt: skip


def train_in_batch(setup, kind):
    """One recipe-d configuration in this process: `cached` or `plain`, one epoch; its row."""
    encoder = setup.make_encoder()
    if kind == "cached":
        batch_size, mini = setup.cached_batch
        model = CachedContrastiveSiamese(encoder, mini_batch_size=mini, hard_negatives=True)
    else:
        batch_size, mini = setup.snli_batch, None
        model = ContrastiveSiamese(encoder, hard_negatives=True)
    seed_everything(setup.seed, model)
    triplets = setup.triplets
    columns = [triplets.anchor, triplets.positive, triplets.negative]
    dataset = siamese_dataset(
        columns,
        None,
        encoder.preprocessor,
        model.active_roles,
        batch_size=batch_size,
        seed=setup.seed,
        batching="shuffle",
    )
    steps = -(-len(triplets.anchor) // batch_size)
    model.compile(optimizer=paper_optimizer(steps, LR, WARMUP))
    rss_before = common.current_rss_mb()
    timer = common.fit_timer()
    with warnings.catch_warnings():
        # The shuffled, unbatched dataset has no known length: Keras says so at the epoch's end.
        warnings.filterwarnings("ignore", message="Your input ran out of data")
        history = model.fit(dataset, epochs=1, callbacks=[timer], verbose=0)
    timing = timer.summary()
    return _row(
        setup,
        "d",
        objective="contrastive (SNLI, hard negatives)",
        kind=kind,
        batch_size=batch_size,
        mini_batch_size=mini,
        snli_triplets=len(triplets.anchor),
        epochs=1,
        learning_rate=LR,
        seconds=timing["fit_seconds"],
        steps=timing["steps"],
        steady_seconds_per_step=timing["steady_seconds_per_step"],
        final_loss=common.last_history(history).get("loss"),
        dev_spearman=dev_spearman(encoder, setup.sts_dev),
        rss_before_fit_mb=rss_before,
        peak_rss_mb=common.peak_rss_mb(),
        ru_maxrss_mb=common.ru_maxrss_mb(),
        target_peak_rss_mb=TARGET_PEAK_RSS_MB,
    )


def recipe_d(args):
    """Cached batch 512 vs plain batch 64, each in a fresh subprocess (its own peak RSS): yields their rows."""
    for kind in ("cached", "plain"):
        command = [sys.executable, __file__, *child_argv(args), "--child", kind]
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        lines = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
        if result.returncode != 0 or not lines:
            tail = " | ".join(result.stderr.strip().splitlines()[-3:])
            lines = [dict(benchmark=NAME, recipe="d", kind=kind, failed=result.returncode, error=tail)]
        yield lines[-1]


def parse_args(argv):
    parser = common.base_parser(__doc__.splitlines()[0])
    common.add_training_args(parser, "first N SNLI triplets (b: 5,000; d: 2,048; --quick: 64 / 32)")
    parser.add_argument("--recipe", choices=("a", "b", "c", "d", "all"), default="all")
    parser.add_argument("--epochs", type=int, default=1, help="STS-B epochs of recipes a and c (1)")
    parser.add_argument("--objectives", default="regression,cosent,angle", help="recipe a's objectives")
    parser.add_argument("--stage2-objective", default="cosent", help="recipe b's STS-B objective (cosent)")
    parser.add_argument("--stage2-epochs", type=int, default=1, help="recipe b's STS-B epochs (1)")
    parser.add_argument("--c-objective", default="cosent", help="recipe c's objective (cosent)")
    parser.add_argument("--sts-limit", type=int, default=None, help="first N STS-B train pairs (all)")
    parser.add_argument("--dev-limit", type=int, default=None, help="first M STS-B dev pairs (all)")
    parser.add_argument("--child", choices=("cached", "plain"), default=None, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def child_argv(args):
    """The options a recipe-d child needs (its data and precision)."""
    argv = ["--compute", args.compute, "--seed", str(args.seed)]
    for flag, value in (("--limit", args.limit), ("--sts-limit", args.sts_limit), ("--dev-limit", args.dev_limit)):
        argv += [flag, str(value)] if value else []
    return argv + (["--quick"] if args.quick else [])


def build_setup(args, model_dir, paths, recipe):
    """The `Setup` of `args` for `recipe` (b and d read different numbers of triplets)."""
    quick = args.quick
    sts_limit = args.sts_limit or (64 if quick else None)
    dev_limit = args.dev_limit or (100 if quick else None)
    train, dev = readers.read_sts(paths[0]), readers.read_sts(paths[1])
    train = examples.SentencePairs(train.sentence_a[:sts_limit], train.sentence_b[:sts_limit], train.labels[:sts_limit])
    dev = examples.SentencePairs(dev.sentence_a[:dev_limit], dev.sentence_b[:dev_limit], dev.labels[:dev_limit])
    wanted = args.limit or {"b": 64 if quick else 5000, "d": 32 if quick else 2048}.get(recipe, 0)
    triplets = None
    if wanted:
        # ~1 triplet per 3 NLI pairs: read enough lines, then keep the first `wanted`.
        nli = readers.read_nli(paths[2], limit=min(100000, 4 * wanted))
        t = examples.nli_to_triplets(nli)
        triplets = examples.Triplets(t.anchor[:wanted], t.positive[:wanted], t.negative[:wanted])
    precision = set_compute(args.compute)
    return Setup(
        make_encoder=lambda: _fresh_minilm(model_dir),
        sts_train=train,
        sts_dev=dev,
        triplets=triplets,
        precision=precision,
        epochs=args.epochs,
        snli_batch=16 if quick else 64,
        cached_batch=(16, 4) if quick else (512, 32),
        stage2_objective=args.stage2_objective,
        stage2_epochs=1 if quick else args.stage2_epochs,
        c_objective=args.c_objective,
        seed=args.seed,
    )


def _fresh_minilm(model_dir):
    return SentenceEncoder.from_preset(str(model_dir))


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    paths = common.shared_files(NAME, STS_TRAIN, STS_DEV, SNLI_TRAIN)
    model_dir = common.model_path(NAME)
    if paths is None or model_dir is None:
        return 0
    if args.child:
        common.emit(**train_in_batch(build_setup(args, model_dir, paths, "d"), args.child))
        return 0
    recipes = "abcd" if args.recipe == "all" else args.recipe
    for recipe in recipes:
        setup = build_setup(args, model_dir, paths, recipe)
        if recipe == "a":
            rows = recipe_a(setup, tuple(args.objectives.split(",")))
        else:
            rows = recipe_b(setup) if recipe == "b" else recipe_c(setup) if recipe == "c" else recipe_d(args)
        full = args.sts_limit is None and args.dev_limit is None and not args.quick
        for row in rows:  # each printed as soon as its model is trained
            if "dev_spearman" in row:
                row["meets_spearman_target"] = bool(row["dev_spearman"] >= TARGET_SPEARMAN) if full else None
            common.emit(quick=args.quick, **row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
