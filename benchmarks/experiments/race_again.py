"""Races timed again: what it costs, and a bound or a choice set too high or too low coming right.

Under `compute="auto"` on an AVX-512 CPU, XNNPACK's float32 route serves a
call of a few texts up to a bound in padded tokens, raced per model and
machine against the bf16 fused graph (`Races.token_bound`). Each
race is timed again, won or lost, until two of its timings agree, at a
call where both engines were built in the process already: the second at
least `self_check.RACE_AGAIN_AFTER[0]` seconds after the first, and where
the two disagree a third at least `RACE_AGAIN_AFTER[1]` after the second;
two that disagree stand lost meanwhile (`VerdictTable.race` with
`again`). This runs, for one model, processes on one fresh cache folder:

1. `cold`: the first few-text call (conversion, checks, the races), then
   one more after each of `--waits` (seconds since the last race stored),
   then one right after;
2. `spell`: the stored races are first rewritten as a slower spell of the
   machine left them on all-mpnet-base-v2 (every size up to `--spell-bound`
   won, the next size and the middle lost, each timed once). Its first
   few-text call serves that bound; a call over the bound by its words runs
   the fused graph's query, and one of a single text XNNPACK's interpreter
   (a race builds nothing once both are built); then the calls of `cold`;
3. `loss`: the same with the stored races rewritten as a false loss left
   them: `--loss-at` lost once, the middle below it won twice, nothing
   above raced;
4. `later`: the bound read from disk, nothing raced;
5. `zero` (alone, on a fresh cache): `cold`, but the process's first two
   races read lost whatever they timed, as a slower spell of XNNPACK's
   would leave the smallest size and the middle below it: the bound is 0,
   so a few texts run the fused graph's own query and the XNNPACK runner
   never asks for its bound. The few-text choice is made again a minute
   later (`route_choice.RECHOOSE_AFTER`), which times the two again.

Every call of a few texts is followed by one of a single text (`ONE`),
whose choice rests on the one-text races, timed again under the same rule.
Each prints one JSON line: the calls' seconds, the few-text bound (0
where the fused graph serves a few texts) after the first call and after
each later one, the races (texts sent, won, seconds, and the route's
seconds over its rival's, the warm-up round included), what reading the
bound costs a query, unsettled and settled, and what `select` costs a
call: its choice kept, and made again with no race due. `--again-after`
sets `self_check.RACE_AGAIN_AFTER` (the least seconds before the second
and the third timing; the library's are 60 and 600) and with it
`RECHOOSE_AFTER`; `--stages cold --repeats N` runs N cold processes, each
on a fresh cache.

    .venv/bin/python benchmarks/experiments/race_again.py --model DIR [--again-after 10,30 --waits 11,31]
    .venv/bin/python benchmarks/experiments/race_again.py --model DIR --stages cold,loss,later [--loss-at 32]
    .venv/bin/python benchmarks/experiments/race_again.py --model DIR --stages cold --waits 61,61,61 --repeats 8
    .venv/bin/python benchmarks/experiments/race_again.py --model DIR --stages zero --again-after 60,120 --waits 61,121
"""

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import common  # noqa: E402

common.silence_tensorflow()
from sbert_keras import SentenceEncoder  # noqa: E402
from sbert_keras.runtime import route_choice  # noqa: E402
from sbert_keras.runtime import self_check  # noqa: E402
from sbert_keras.runtime.routes import xnnpack  # noqa: E402

FEW = ["A man is playing a flute.", "A woman is slicing an onion.", "The cat sat on the mat."]
ONE = ["A cat."]
MANY = [f"Sentence number {i} says a little more about the cat on the mat." for i in range(12)]
TOKEN_RACE = "xnnpack_float32>fused:"
STAGES = ("cold", "spell", "loss", "later", "zero")


def seconds(call):
    start = time.perf_counter()
    call()
    return round(time.perf_counter() - start, 3)


def micros(call, n=2000):
    """Microseconds one `call()` takes, the mean of `n`."""
    start = time.perf_counter()
    for _ in range(n):
        call()
    return round(1e6 * (time.perf_counter() - start) / n, 2)


def few_text_bound(encoder):
    """The padded tokens of a few-text call XNNPACK runs: its runner's bound, or 0 where the fused graph serves."""
    return getattr(encoder.engine.runner_for("auto", "few"), "max_tokens", 0)


def costs(encoder):
    """Microseconds of what a few-text query asks: the bound (where XNNPACK serves), `select` kept and made again."""
    engine, runner = encoder.engine, encoder.engine.runner_for("auto", "few")
    out = {"bound_read_us": micros(lambda: runner.max_tokens) if hasattr(runner, "max_tokens") else None}
    out["select_us"] = micros(lambda: engine.select("auto", "few"))
    choice = engine.choice

    def made_again():  # what `select` does when it makes the choice again (no race is due right after a call)
        raced = []
        for route, resolved in choice.candidates("auto", "few"):
            if choice.passes(route.name, resolved) and choice.outruns(route, resolved, "auto", "few", raced):
                return

    out["select_made_again_us"] = micros(made_again, 200)
    return out


def count_seconds(runner, spent):
    """Adds the seconds of each `runner.query` to `spent[runner]` (an attribute of this runner object only)."""
    query = runner.query

    def timed(texts):
        start = time.perf_counter()
        try:
            return query(texts)
        finally:
            spent[runner] += time.perf_counter() - start

    runner.query = timed


def stored_races(cache):
    """The races on disk: `{"64": True, "again 64": False, "xnnpack_float32>xla:one/float32": True, ...}`."""
    races = {}
    for path in glob.glob(os.path.join(cache, "verdicts", "*.json")):
        for key, won in json.loads(Path(path).read_text()).items():
            if TOKEN_RACE in key:
                prefix, size = key.split(TOKEN_RACE)
                races[prefix + size.split("/")[0]] = won
            elif ">" in key:
                races[key] = won
    return races


def forged_races(stage, spell_bound, loss_at):
    """`{size: timings}` of the token races as a slower spell (`spell`) or a false loss (`loss`) left them."""
    steps = xnnpack.TOKEN_STEPS
    if stage == "spell":
        lost = next(step for step in steps if step > spell_bound)
        middle = (spell_bound + lost) // 2
        return {**{s: [True] for s in steps if s <= spell_bound}, lost: [False], middle: [False]}
    below = max((s for s in steps if s < loss_at), default=0)
    return {**{s: [True, True] for s in steps if s < loss_at}, (below + loss_at) // 2: [True, True], loss_at: [False]}


def forge(cache, races):
    """Rewrites the stored token races (every timing) as `races`, `{size: timings}`."""
    for path in glob.glob(os.path.join(cache, "verdicts", "*.json")):
        verdicts = {k: v for k, v in json.loads(Path(path).read_text()).items() if TOKEN_RACE not in k}
        for size, timings in races.items():
            for i, won in enumerate(timings):
                verdicts[f"{self_check.AGAIN * i}{TOKEN_RACE}{size}/bfloat16"] = won
        Path(path).write_text(json.dumps(verdicts))


def child(model, stage, again_after, waits):
    """One process of the experiment; prints its JSON line."""
    self_check.RACE_AGAIN_AFTER, route_choice.RECHOOSE_AFTER = again_after, again_after[0]
    races, race, forced = [], route_choice.race, [2 if stage == "zero" else 0]  # races left to read lost

    def timed_race(runner, rival, queries=None, **kwargs):
        start, spent = time.perf_counter(), {runner: 0.0, rival: 0.0}
        for each in spent:  # the two runners' seconds over the race's rounds, the warm-up one included
            count_seconds(each, spent)
        won = race(runner, rival, queries=queries, **kwargs) and not forced[0]
        forced[0] = max(0, forced[0] - 1)
        texts = sum(len(q) for q in queries) if queries else None
        ratio = round(spent[runner] / spent[rival], 3) if spent[rival] else None
        races.append([texts, won, round(time.perf_counter() - start, 3), ratio])
        return won

    def calls(line, suffix=""):  # a few texts, then one text, each with the races it timed (`races` is empty)
        line[f"few{suffix}_s"] = seconds(lambda: encoder.encode(FEW))
        line[f"races{suffix}"] = list(races)
        line[f"one{suffix}_s"] = seconds(lambda: encoder.encode(ONE))
        line[f"one_races{suffix}"] = races[len(line[f"races{suffix}"]) :]
        line[f"bound{suffix}"] = few_text_bound(encoder)
        races.clear()

    route_choice.race = timed_race
    encoder = SentenceEncoder.from_preset(model)
    line = {"model": Path(model).name, "stage": stage}
    calls(line, "_first")
    line["costs_first"] = costs(encoder)
    if stage in ("spell", "loss"):  # builds the fused graph's query
        line["over_the_bound_s"] = seconds(lambda: encoder.encode(MANY))
    cache, line["later_calls"] = os.environ["SBERT_KERAS_CACHE_DIR"], []
    for wait in waits if stage != "later" else ():
        written = max(os.path.getmtime(p) for p in glob.glob(os.path.join(cache, "verdicts", "*.json")))
        time.sleep(max(0.0, written + wait - time.time()))
        call = {}
        calls(call)
        line["later_calls"].append(call)
    calls(line, "_then")
    line.update(costs_last=costs(encoder), stored=stored_races(cache))
    print(json.dumps(line), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="a sentence-transformers or sbert_keras folder")
    parser.add_argument("--again-after", default="60,600", help="least seconds before the second, third timing")
    parser.add_argument("--spell-bound", type=int, default=128, help="the bound the `spell` stage's races give")
    parser.add_argument("--loss-at", type=int, default=32, help="the size the `loss` stage's races lost once")
    parser.add_argument("--waits", default="61,61", help="seconds after the last race stored before each call")
    parser.add_argument("--stages", default=",".join(STAGES), help="which of cold, spell, later to run, in order")
    parser.add_argument("--repeats", type=int, default=1, help="times to run the stages, each on a fresh cache")
    parser.add_argument("--child", choices=STAGES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        again_after = tuple(float(s) for s in args.again_after.split(","))
        return child(args.model, args.child, again_after, [float(s) for s in args.waits.split(",")])
    for _ in range(args.repeats):
        with tempfile.TemporaryDirectory() as cache:
            env = dict(os.environ, SBERT_KERAS_CACHE_DIR=cache)
            for stage in args.stages.split(","):
                if stage in ("spell", "loss"):
                    forge(cache, forged_races(stage, args.spell_bound, args.loss_at))
                command = [sys.executable, __file__, "--model", args.model, "--child", stage]
                command += ["--waits", args.waits, "--again-after", args.again_after]
                subprocess.run(command, env=env, check=True)


if __name__ == "__main__":
    main()
