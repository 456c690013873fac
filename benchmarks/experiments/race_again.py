"""A token race timed again: what it costs, and a bound set too high in a slower spell coming down.

Under `compute="auto"` on an AVX-512 CPU, XNNPACK's float32 route serves a
call of a few texts up to a bound in padded tokens, raced once per model
and machine against the bf16 fused graph (`RouteChoice.token_bound`). A
won race is timed once more at least `self_check.RACE_AGAIN_AFTER` seconds
later, at a call where the fused graph's query is built already, and
stays won only if won again (`VerdictTable.race` with `again`). This runs,
for one model, three processes on one fresh cache folder:

1. `cold`: the first few-text call (conversion, checks, the races); once
   `--again-after` seconds have passed since the races, two more, the first
   of which times each won race again;
2. `spell`: the stored races are first rewritten as a slower spell of the
   machine left them on all-mpnet-base-v2 (every size up to `--spell-bound`
   won, the next size and the middle lost; the races timed again removed).
   Its first few-text call serves that bound, unsettled; a call over the
   bound by its words runs the fused graph's query (which makes a race
   cheap); the next few-text call times the won races again;
3. `later`: the bound read settled from disk, nothing raced.

Each prints one JSON line: the calls' seconds, the runner's bound after
the first call and at the end, the races (texts sent, won, seconds, and
the route's seconds over its rival's, the warm-up round included), and
what reading the bound costs a query, unsettled and settled.
`--again-after` sets the wait (the library's is 60 s); `--stages cold
--repeats N` runs N cold processes, each on a fresh cache.

    .venv/bin/python benchmarks/experiments/race_again.py --model FOLDER [--again-after 10] [--spell-bound 128]
    .venv/bin/python benchmarks/experiments/race_again.py --model FOLDER --again-after 60 --stages cold --repeats 8
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
MANY = [f"Sentence number {i} says a little more about the cat on the mat." for i in range(12)]
TOKEN_RACE = "xnnpack_float32>fused:"
STAGES = ("cold", "spell", "later")


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


def forge_spell(cache, bound):
    """Rewrites the stored token races as a slower spell left them: won up to `bound`, lost above."""
    for path in glob.glob(os.path.join(cache, "verdicts", "*.json")):
        verdicts = {k: v for k, v in json.loads(Path(path).read_text()).items() if TOKEN_RACE not in k}
        steps = xnnpack.TOKEN_STEPS
        lost = next(step for step in steps if step > bound)
        for size, won in [(s, True) for s in steps if s <= bound] + [(lost, False), ((bound + lost) // 2, False)]:
            verdicts[f"{TOKEN_RACE}{size}/bfloat16"] = won
        Path(path).write_text(json.dumps(verdicts))


def child(model, stage, again_after):
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
    if stage == "spell":
        line["over_the_bound_s"] = seconds(lambda: encoder.encode(MANY))
    cache = os.environ["SBERT_KERAS_CACHE_DIR"]
    written = max(os.path.getmtime(p) for p in glob.glob(os.path.join(cache, "verdicts", "*.json")))
    time.sleep(max(0.0, written + again_after + 1 - time.time()) if stage != "later" else 0)
    line.update(next_few_s=seconds(lambda: encoder.encode(FEW)), then_few_s=seconds(lambda: encoder.encode(FEW)))
    line.update(bound_last=runner.max_tokens, bound_read_us_last=bound_cost_us(runner), races_last=races)
    line["stored"] = stored_races(cache)
    print(json.dumps(line), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="a sentence-transformers or sbert_keras folder")
    parser.add_argument("--again-after", type=float, default=10.0, help="seconds before a race is timed again")
    parser.add_argument("--spell-bound", type=int, default=128, help="the bound the rewritten races give")
    parser.add_argument("--stages", default=",".join(STAGES), help="which of cold, spell, later to run, in order")
    parser.add_argument("--repeats", type=int, default=1, help="times to run the stages, each on a fresh cache")
    parser.add_argument("--child", choices=STAGES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.model, args.child, args.again_after)
    for _ in range(args.repeats):
        with tempfile.TemporaryDirectory() as cache:
            env = dict(os.environ, SBERT_KERAS_CACHE_DIR=cache)
            for stage in args.stages.split(","):
                if stage == "spell":
                    forge_spell(cache, args.spell_bound)
                command = [sys.executable, __file__, "--model", args.model, "--child", stage]
                subprocess.run(command + ["--again-after", str(args.again_after)], env=env, check=True)


if __name__ == "__main__":
    main()
