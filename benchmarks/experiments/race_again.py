"""Token races timed again: what it costs, and a bound set too high or too low coming right.

Under `compute="auto"` on an AVX-512 CPU, XNNPACK's float32 route serves a
call of a few texts up to a bound in padded tokens, raced once per model
and machine against the bf16 fused graph (`RouteChoice.token_bound`). Each
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
4. `later`: the bound read from disk, nothing raced.

Each prints one JSON line: the calls' seconds, the runner's bound after
the first call and after each later one, the races (texts sent, won,
seconds, and the route's seconds over its rival's, the warm-up round
included), and what reading the bound costs a query, unsettled and
settled. `--again-after` sets `self_check.RACE_AGAIN_AFTER` (the least
seconds before the second and the third timing; the library's are 60 and
600); `--stages cold --repeats N` runs N cold processes, each on a fresh
cache.

    .venv/bin/python benchmarks/experiments/race_again.py --model FOLDER [--again-after 10,30 --waits 11,31]
    .venv/bin/python benchmarks/experiments/race_again.py --model FOLDER --stages cold,loss,later [--loss-at 32]
    .venv/bin/python benchmarks/experiments/race_again.py --model FOLDER --stages cold --waits 61,61,61 --repeats 8
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
STAGES = ("cold", "spell", "loss", "later")


def seconds(call):
    start = time.perf_counter()
    call()
    return round(time.perf_counter() - start, 3)


def bound_cost_us(runner, n=2000):
    """Microseconds `runner.max_tokens` takes (a query reads it once)."""
    start = time.perf_counter()
    for _ in range(n):
        runner.max_tokens  # noqa: B018 - the property is what is timed
    return round(1e6 * (time.perf_counter() - start) / n, 2)


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
    """The token races on disk: `{"64": True, "again 64": False, ...}`."""
    races = {}
    for path in glob.glob(os.path.join(cache, "verdicts", "*.json")):
        for key, won in json.loads(Path(path).read_text()).items():
            if TOKEN_RACE in key:
                prefix, size = key.split(TOKEN_RACE)
                races[prefix + size.split("/")[0]] = won
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
    self_check.RACE_AGAIN_AFTER = again_after
    races, race = [], route_choice.race

    def timed_race(runner, rival, queries=None, **kwargs):
        start, spent = time.perf_counter(), {runner: 0.0, rival: 0.0}
        for each in spent:  # the two runners' seconds over the race's rounds, the warm-up one included
            count_seconds(each, spent)
        won = race(runner, rival, queries=queries, **kwargs)
        texts = sum(len(q) for q in queries) if queries else None
        ratio = round(spent[runner] / spent[rival], 3) if spent[rival] else None
        races.append([texts, won, round(time.perf_counter() - start, 3), ratio])
        return won

    route_choice.race = timed_race
    encoder = SentenceEncoder.from_preset(model)
    line = {"model": Path(model).name, "stage": stage, "first_few_s": seconds(lambda: encoder.encode(FEW))}
    runner = encoder.engine.runner_for("auto", "few")
    line.update(bound_first=runner.max_tokens, bound_read_us_first=bound_cost_us(runner), races_first=list(races))
    races.clear()
    if stage in ("spell", "loss"):  # builds the fused graph's query, and XNNPACK's interpreter (one text)
        line["over_the_bound_s"] = seconds(lambda: encoder.encode(MANY))
        line["one_text_s"] = seconds(lambda: encoder.encode(ONE))
    cache, line["later_calls"] = os.environ["SBERT_KERAS_CACHE_DIR"], []
    for wait in waits if stage != "later" else ():
        written = max(os.path.getmtime(p) for p in glob.glob(os.path.join(cache, "verdicts", "*.json")))
        time.sleep(max(0.0, written + wait - time.time()))
        call = {"s": seconds(lambda: encoder.encode(FEW)), "bound": runner.max_tokens, "races": list(races)}
        line["later_calls"].append(call)
        races.clear()
    line.update(then_few_s=seconds(lambda: encoder.encode(FEW)), races_then=races)
    line.update(bound_last=runner.max_tokens, bound_read_us_last=bound_cost_us(runner))
    line["stored"] = stored_races(cache)
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
