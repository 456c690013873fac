"""Peer: sentence-transformers fine-tuning on STS-B with CosineSimilarityLoss (or `--loss cosent|angle`).

Usage: st_sts_finetune.py --train sts-train.csv --dev sts-dev.csv
       [--limit N] [--dev-limit M] [--seed 0] [--mode auto|trainer|loop] [--model DIR]

The sentence-transformers STS recipe: labels score / 5, CosineSimilarityLoss
(MSE of the cosine), 1 epoch, batch 16, lr 2e-5, linear warmup over 10 % of
the steps then linear decay, AdamW, gradient clipping at 1.0. Reports the dev
Spearman correlation (cosine similarity vs gold score, scipy) before and
after, and the wall time of the training alone.

`--mode auto` uses `SentenceTransformerTrainer` when `accelerate` (which the
Hugging Face Trainer requires) is installed, else a plain PyTorch loop with
the Trainer's defaults: AdamW(betas 0.9/0.999, eps 1e-8, weight decay
`--weight-decay`, default 0.0 as in `TrainingArguments`, not applied to
biases and LayerNorm), `get_linear_schedule_with_warmup`, warmup
ceil(0.1 x steps), max_grad_norm 1.0, a seeded random order, last partial
batch kept. The output says which was used (`mode`).
"""

import argparse
import importlib.util
import math
import tempfile
import time

import peer_common

BATCH_SIZE = 16
LEARNING_RATE = 2e-5
WARMUP_FRACTION = 0.1
EPOCHS = 1
LOSS_CLASSES = {"cosine": "CosineSimilarityLoss", "cosent": "CoSENTLoss", "angle": "AnglELoss"}


def make_loss(name, model):
    """The sentence-transformers loss `LOSS_CLASSES[name]` on `model`."""
    from sentence_transformers import losses

    return getattr(losses, LOSS_CLASSES[name])(model)


def dev_spearman(model, a, b, scores, batch_size=32):
    """Spearman of cos(u, v) with the gold scores; each distinct sentence encoded once."""
    import numpy as np
    from scipy import stats

    unique = list(dict.fromkeys(a + b))
    vectors = model.encode(
        unique, batch_size=batch_size, normalize_embeddings=True, show_progress_bar=False, convert_to_numpy=True
    ).astype("float64")
    position = {t: i for i, t in enumerate(unique)}
    u = vectors[[position[t] for t in a]]
    v = vectors[[position[t] for t in b]]
    cosine = np.sum(u * v, axis=1)
    return float(stats.spearmanr(cosine, scores).statistic)


def train_with_trainer(model, a, b, labels, seed, loss_name="cosine"):
    from datasets import Dataset
    from sentence_transformers import SentenceTransformerTrainer
    from sentence_transformers import SentenceTransformerTrainingArguments

    dataset = Dataset.from_dict({"sentence1": a, "sentence2": b, "score": labels})
    with tempfile.TemporaryDirectory() as output_dir:
        common = dict(
            output_dir=output_dir,
            per_device_train_batch_size=BATCH_SIZE,
            learning_rate=LEARNING_RATE,
            num_train_epochs=EPOCHS,
            lr_scheduler_type="linear",
            report_to="none",
            save_strategy="no",
            seed=seed,
            disable_tqdm=True,
            logging_strategy="no",
        )
        try:
            args = SentenceTransformerTrainingArguments(warmup_ratio=WARMUP_FRACTION, **common)
        except TypeError:  # transformers 5: a float warmup_steps < 1 is a ratio
            args = SentenceTransformerTrainingArguments(warmup_steps=WARMUP_FRACTION, **common)
        trainer = SentenceTransformerTrainer(
            model=model,
            args=args,
            train_dataset=dataset,
            loss=make_loss(loss_name, model),
        )
        start = time.perf_counter()
        trainer.train()
        seconds = time.perf_counter() - start
        steps = trainer.state.global_step
        warmup = args.get_warmup_steps(steps) if hasattr(args, "get_warmup_steps") else None
    return seconds, steps, {"optimizer": str(args.optim), "weight_decay": args.weight_decay, "warmup_steps": warmup}


def loop_step(model, loss_fn, optimizer, scheduler, a, b, labels):
    """One step of the plain loop: tokenise both columns, loss, backward, clip at 1.0, AdamW, schedule.

    Returns the tokenised features of the two columns.
    """
    import torch

    features = [model.preprocess(column) for column in (a, b)]
    loss = loss_fn(features, torch.tensor(labels, dtype=torch.float32))
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad()
    return features


def train_with_loop(model, a, b, labels, seed, weight_decay, loss_name="cosine"):
    import torch
    from transformers import get_linear_schedule_with_warmup

    torch.manual_seed(seed)
    n = len(a)
    steps = math.ceil(n / BATCH_SIZE) * EPOCHS
    warmup = math.ceil(WARMUP_FRACTION * steps)
    decay, no_decay = [], []
    for name, parameter in model.named_parameters():
        if not parameter.requires_grad:
            continue
        lowered = name.lower()
        (no_decay if "bias" in lowered or "layernorm" in lowered or "layer_norm" in lowered else decay).append(
            parameter
        )
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=LEARNING_RATE,
        betas=(0.9, 0.999),
        eps=1e-8,
    )
    scheduler = get_linear_schedule_with_warmup(optimizer, warmup, steps)
    loss_fn = make_loss(loss_name, model)
    generator = torch.Generator().manual_seed(seed)
    model.train()
    start = time.perf_counter()
    first_end = None
    done = 0
    for _ in range(EPOCHS):
        order = torch.randperm(n, generator=generator).tolist()
        for first in range(0, n, BATCH_SIZE):
            index = order[first : first + BATCH_SIZE]
            pairs = ([column[i] for i in index] for column in (a, b))
            loop_step(model, loss_fn, optimizer, scheduler, *pairs, [labels[i] for i in index])
            done += 1
            if first_end is None:
                first_end = time.perf_counter()
    end = time.perf_counter()
    model.eval()
    return (
        end - start,
        done,
        {
            "optimizer": "torch.optim.AdamW",
            "weight_decay": weight_decay,
            "warmup_steps": warmup,
            "max_grad_norm": 1.0,
            "first_step_seconds": first_end - start if first_end else None,
            "steady_seconds_per_step": (end - first_end) / (done - 1) if done > 1 else None,
        },
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", required=True)
    parser.add_argument("--dev", required=True)
    parser.add_argument("--limit", type=int, default=None, help="first N training pairs")
    parser.add_argument("--dev-limit", type=int, default=None, help="first M dev pairs")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--mode", choices=("auto", "trainer", "loop"), default="auto")
    parser.add_argument(
        "--weight-decay",
        type=float,
        default=0.0,
        help="loop mode only (the Trainer's TrainingArguments default is 0.0)",
    )
    parser.add_argument("--model", default=None, help="sentence-transformers folder")
    parser.add_argument("--loss", choices=sorted(LOSS_CLASSES), default="cosine", help="cosine: CosineSimilarityLoss")
    args = parser.parse_args()

    torch = peer_common.setup_torch()
    torch.manual_seed(args.seed)
    train_a, train_b, train_scores = peer_common.read_sts(args.train, args.limit)
    dev_a, dev_b, dev_scores = peer_common.read_sts(args.dev, args.dev_limit)
    labels = [s / 5.0 for s in train_scores]

    model = peer_common.load_model(args.model)
    before = dev_spearman(model, dev_a, dev_b, dev_scores)

    has_accelerate = importlib.util.find_spec("accelerate") is not None
    mode = args.mode
    reason = None
    if mode == "auto":
        mode = "trainer" if has_accelerate else "loop"
        if not has_accelerate:
            reason = "accelerate is not installed (the Hugging Face Trainer requires it)"
    if mode == "trainer":
        seconds, steps, details = train_with_trainer(model, train_a, train_b, labels, args.seed, args.loss)
        mode_name = "SentenceTransformerTrainer"
    else:
        seconds, steps, details = train_with_loop(
            model, train_a, train_b, labels, args.seed, args.weight_decay, args.loss
        )
        mode_name = "torch-loop"
    after = dev_spearman(model, dev_a, dev_b, dev_scores)
    peer_common.emit(
        peer="sentence-transformers",
        script="st_sts_finetune",
        mode=mode_name,
        fallback_reason=reason,
        train_pairs=len(train_a),
        dev_pairs=len(dev_a),
        label_scale="score/5",
        loss=LOSS_CLASSES[args.loss],
        epochs=EPOCHS,
        batch_size=BATCH_SIZE,
        learning_rate=LEARNING_RATE,
        warmup_fraction=WARMUP_FRACTION,
        scheduler="linear",
        seed=args.seed,
        steps=steps,
        train_seconds=seconds,
        seconds_per_step=seconds / max(steps, 1),
        dev_spearman_before=before,
        dev_spearman_after=after,
        peak_rss_mb=peer_common.peak_rss_mb(),
        **details,
        **peer_common.versions(),
    )


if __name__ == "__main__":
    main()
