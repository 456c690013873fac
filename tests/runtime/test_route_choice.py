"""The choice of route: a route that races another serves only where it won, under "auto" and a named compute
path alike (`route_choice`)."""

import time
import types
import warnings

import pytest

from conftest import tiny_encoder
from sbert_keras.runtime import cold_start
from sbert_keras.runtime import route_choice
from sbert_keras.runtime import self_check
from sbert_keras.runtime.routes import base

# The real race: conftest pins `route_choice.race` for every test.
RACE = route_choice.race


class SleepyRunner(base.Runner):
    """A runner whose query takes `seconds`; counts its calls."""

    def __init__(self, seconds):
        self.seconds, self.calls = seconds, 0

    def query(self, texts):
        self.calls += 1
        time.sleep(self.seconds)
        return None, 0, False


def test_race_times_interleaved_single_queries():
    fast, slow = SleepyRunner(0.001), SleepyRunner(0.004)
    assert RACE(fast, slow, queries=(["a"], ["b"]), rounds=3)
    assert fast.calls == slow.calls == 2 * (1 + 3)  # one warm-up round, then the timed ones
    assert not RACE(slow, fast, queries=(["a"],), rounds=3)


@pytest.mark.parametrize("won, route", [(True, "xla"), (False, "fused")])
def test_auto_takes_the_single_query_route_only_where_it_won(monkeypatch, on_host, won, route):
    raced = []
    monkeypatch.setattr(route_choice, "race", lambda runner, rival, **_: raced.append((runner, rival)) or won)
    engine = on_host(tiny_encoder(), cpu_flags={"avx2", "fma"})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a lost race is no failure
        assert engine.select("auto", "one") == (engine.routes[route], "float32")
    assert len(raced) == 1
    assert engine.verdicts.get("xla>fused:one", "float32") is won
    assert engine.select("float32", "one")[0].name == route  # a named compute path: the same race, kept
    assert engine.select("auto", "few")[0].name == "fused"
    assert len(raced) == 1


def test_a_race_is_kept_per_machine(monkeypatch, tmp_path):
    monkeypatch.setenv(cold_start.CACHE_ENV, str(tmp_path))
    raced = []
    monkeypatch.setattr(route_choice, "race", lambda runner, rival, queries=None, batch=None: raced.append(1) or False)
    first = tiny_encoder(seed=3)
    text = "a man is playing guitar"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        vector = first.encode([text])
        again = tiny_encoder(seed=3)  # same weights: its verdicts and races come from disk
        assert again.engine.select("auto", "one")[0].name == "fused"
        again.encode([text])
    assert raced == [1]
    assert again.engine.verdicts.get("xla>fused:one", again.engine.route()[1]) is False
    assert vector.shape == (1, first.embedding_dim)


def test_a_choice_resting_on_an_unsettled_race_is_made_again_and_the_race_timed_again(monkeypatch, on_host):
    timings, raced, now = iter([False, True, True]), [], [0.0]
    monkeypatch.setattr(route_choice, "race", lambda runner, rival, **_: raced.append(1) or next(timings))
    monkeypatch.setattr(route_choice, "time", types.SimpleNamespace(time=lambda: now[0]))  # the choice's clock
    monkeypatch.setattr(self_check, "RACE_AGAIN_AFTER", (0.0, 0.0))  # each race due at once

    def chosen(seconds_later):
        now[0] += seconds_later
        return engine.select("auto", "one")[0]

    engine = on_host(tiny_encoder(), cpu_flags={"avx2", "fma"})
    xla, fused = engine.routes["xla"], engine.routes["fused"]
    assert not any(route.warm("float32", size) for route in (xla, fused) for size in ("one", "batch"))
    assert chosen(0) is fused and len(raced) == 1  # lost once
    assert fused.warm("float32", "batch") and not fused.warm("float32", "one")  # the check traced the fused graph
    assert chosen(route_choice.RECHOOSE_AFTER - 1) is fused and len(raced) == 1  # the choice is kept a while
    assert chosen(1) is fused and len(raced) == 1  # made again, but no race: the stand-in built no graph
    xla.build("float32").query(["a few words"]), fused.build("float32").query(["a few words"])
    assert xla.warm("float32", "one") and fused.warm("float32", "one")
    assert chosen(0) is fused and len(raced) == 1  # kept until its time
    assert chosen(route_choice.RECHOOSE_AFTER) is fused and len(raced) == 2  # won after a loss: it stands lost
    assert chosen(route_choice.RECHOOSE_AFTER) is xla and len(raced) == 3  # won again: two of three agree
    assert engine.verdicts.settled("xla>fused:one", "float32")
    assert chosen(1e9) is xla and len(raced) == 3  # settled: kept for good
