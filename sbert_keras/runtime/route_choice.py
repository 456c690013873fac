"""Which route serves a request: a filter and a sort over what the routes declare, and timed races.

Why this exists: the routes describe themselves (`routes.base.Route`: the
compute paths and size classes they serve, what the host must offer, their
rank, whether a SavedModel can hold them), so the choice of route is one
rule, not one condition per route. `RouteChoice` applies it for one encoder
on one `hardware.Host`: for a requested compute, the resolved compute paths
to try in order (`computes`); in each, the registered routes that serve it,
the size class and this host, highest rank first (`candidates`); the first
that passes its self-check serves (`select`, kept per (compute, size
class)). A route that builds on another and is not `ready` (its first
build would convert the model) is left out until `preparing` (within
`encoder.warmup()`) builds it. The verdicts live in the one `self_check.VerdictTable`, so a route
that fails warns once and the next one serves. A route that `races` others
serves only where it answered faster than each of them in a timed race on
this machine (`race`; `Races`, kept with the verdicts), under `"auto"` and
a named compute path alike: no request takes a route slower than another
that passes its check for it (the XLA query computes float32, so without
its race `compute="bfloat16"` would send one text of all-mpnet-base-v2 to it
on an AMX CPU at twice the bf16 fused graph's time). A route
that hands large calls to the route it builds on races it at each of its
`token_steps` instead, and then between the sizes where it won and lost
(`Races.token_bound`); its runner gets the bound (`build`), asked at each
query.

Every race, of a size class or of a call size, is timed again, won or
lost, at a request where both sides' graphs for it are built already
(`Route.warm`: the race builds nothing), in this process or a later one: a
minute after the first timing (`self_check.RACE_AGAIN_AFTER`), and where
the two disagree, a third ten minutes after the second decides; two
timings that disagree stand lost meanwhile (`VerdictTable.race` with
`again`). A machine can run slower for minutes and slow one side more than
the other, so one race could set a choice or a bound wrong for good; a race
the route lost stays the rival's until the route wins it twice. Until every
race it rests on is settled, a choice is made again a minute after it was
made (`RECHOOSE_AFTER`), and a bound is worked out again at each query
(microseconds); once settled, each is kept.

Example:
```python
choice = RouteChoice(encoder, graphs, Host(cpu_flags={"avx2"}))
route, compute = choice.select("auto", "batch")  # the fused route, "float32"
```
"""

import contextlib
import math
import statistics
import time
import warnings

import numpy as np

from sbert_keras.runtime import self_check
from sbert_keras.runtime.kernels import int8_quantization
from sbert_keras.runtime.kernels import onednn_int8
from sbert_keras.runtime.routes import base
from sbert_keras.runtime.routes import fused  # noqa: F401 - each route module registers its route
from sbert_keras.runtime.routes import keras_graph  # noqa: F401
from sbert_keras.runtime.routes import xla_query  # noqa: F401
from sbert_keras.runtime.routes import xnnpack  # noqa: F401
from sbert_keras.utils import hardware
from sbert_keras.utils.defaults import COMPUTES

# What a race times: short sentences, each one query (all in one query for a few texts, repeated to a
# call's size for `token_bound`, or tiled to one batch of `RACE_BATCH_ROWS` rows for batches), in
# interleaved rounds after a warm-up round.
RACE_TEXTS = int8_quantization.CALIBRATION_SENTENCES[:4]
RACE_ROUNDS, RACE_BATCH_ROWS = 5, 32
# Races that halve the gap between the last of `token_steps` a route won and the first it lost
# (`Races.token_bound`), each at its middle: one puts the bound within half that gap of the crossing.
TOKEN_BISECTIONS = 1
# Seconds a choice resting on an unsettled race is kept before `select` makes it again (races due then are timed).
RECHOOSE_AFTER = self_check.RACE_AGAIN_AFTER[0]


def resolve_compute(compute, host=None):
    """`compute` checked; `"auto"` (or None) replaced by `host.auto_precision()` (default host: this machine)."""
    if compute is None:
        compute = "auto"
    if compute not in COMPUTES:
        raise ValueError(f"`compute` must be one of {COMPUTES}. Received {compute!r}.")
    return (host or hardware.current_host()).auto_precision() if compute == "auto" else compute


def race(runner, rival, queries=None, rounds=RACE_ROUNDS, batch=None):
    """Whether `runner` answers faster than `rival` (median of `rounds`): `queries`, or one call of `batch`.

    Args:
        runner: a route's `Runner`.
        rival: the `Runner` it races.
        queries: lists of strings, each sent in one query call (default:
            each of `RACE_TEXTS` alone).
        rounds: int. Timed rounds, the two runners interleaved, after one warm-up round each.
        batch: `(token_ids, padding_mask)` or None. When given, each round is one call of each
            runner's batch call on it instead of the queries.
    """
    queries = [[text] for text in RACE_TEXTS] if queries is None else queries
    calls = {}
    for candidate in (runner, rival):
        if batch is None:
            calls[candidate] = lambda candidate=candidate: [candidate.query(texts) for texts in queries]
        else:
            run = candidate.batch()
            calls[candidate] = lambda run=run: run(*batch)

    def seconds(candidate):
        start = time.perf_counter()
        calls[candidate]()
        return time.perf_counter() - start

    seconds(runner), seconds(rival)
    times = [(seconds(runner), seconds(rival)) for _ in range(rounds)]
    return statistics.median(t[0] for t in times) < statistics.median(t[1] for t in times)


def race_queries(encoder, size, tokens=None):
    """The queries a race of `size` texts times (`race`): None (each of `RACE_TEXTS` alone) for one text.

    A few texts: `RACE_TEXTS` in one call. With `tokens`: one call of
    `RACE_TEXTS` repeated to at most that many padded tokens (one text at least).
    """
    if tokens is not None:
        width = self_check.sentence_batch(encoder, RACE_TEXTS)[0].shape[1]
        return [[RACE_TEXTS[i % len(RACE_TEXTS)] for i in range(max(1, tokens // width))]]
    return [list(RACE_TEXTS)] if size == "few" else None


def race_batch(encoder):
    """The batch a race of batch calls times: `RACE_TEXTS` tokenised, tiled to `RACE_BATCH_ROWS` rows."""
    if encoder.preprocessor is None:
        token_ids, mask = self_check.probe_batch(encoder)
    else:
        token_ids, mask = self_check.sentence_batch(encoder, RACE_TEXTS)
    repeat = -(-RACE_BATCH_ROWS // len(token_ids))
    return np.tile(token_ids, (repeat, 1))[:RACE_BATCH_ROWS], np.tile(mask, (repeat, 1))[:RACE_BATCH_ROWS]


def runnable_compute(compute, host, encoder, warned):
    """`host.runnable_precision(compute)`; a redirection warns once per compute in `warned` (a set).

    The warning names what runs instead (float16 on a CPU: bfloat16 or float32).
    """
    runs = host.runnable_precision(compute)
    if runs != compute and compute not in warned:
        warned.add(compute)
        warnings.warn(
            f"compute={compute!r} has no fast kernels on a CPU (TensorFlow's float16 matmuls run at "
            f"about one text per second); {encoder.name!r} runs in {runs} instead. Pass "
            f"compute={runs!r} (or 'auto') to silence this.",
            stacklevel=7,
        )
    return runs


class Races:
    """The timed races of one engine's routes on this machine, and the token bounds they set (module docstring).

    Args:
        encoder: a `SentenceEncoder`.
        routes: its engine's routes, `{name: route}`.
        verdicts: its engine's `self_check.VerdictTable`, where the races are kept.

    Example:
    ```python
    races = Races(encoder, routes, verdicts)
    races.won(xla_route, fused_route, "float32", "one")  # timed at first, then remembered
    ```
    """

    def __init__(self, encoder, routes, verdicts):
        self.encoder, self.routes, self.verdicts = encoder, routes, verdicts
        self._bounds = {}  # (route name, compute) -> its settled `token_bound`

    def won(self, route, rival, compute, size, tokens=None, asked=None):
        """Whether `route` stands won against `rival` for `size` texts, or one call of `tokens` padded tokens.

        The race (`race`) is kept with the verdicts as `"route>rival:size"`
        (or `:tokens`) and timed again where both sides are `warm`
        (`VerdictTable.race` with `again`); `(name, compute)` is appended
        to `asked` (a list) where given.
        """

        def timed():  # a route with `token_steps` is built unbounded here: no hand-off
            batch = race_batch(self.encoder) if size == "batch" else None
            queries = race_queries(self.encoder, size, tokens)
            return race(route.build(compute), rival.build(compute), queries=queries, batch=batch)

        name = f"{route.name}>{rival.name}:{size if tokens is None else tokens}"
        if asked is not None:
            asked.append((name, compute))
        warm = lambda: route.warm(compute, size) and rival.warm(compute, size)  # noqa: E731
        return self.verdicts.race(name, compute, timed, again=warm)

    def token_bound(self, route, compute, asked=None):
        """The most padded tokens of a call `route` runs itself in `compute`; None without `token_steps`.

        Each of its `token_steps`, smallest first, is a race (`won`): one
        query of that many tokens through the route against the route it
        `builds_on`, until it loses one. Then `TOKEN_BISECTIONS` races, each
        at the middle of the gap between the largest size it won (0 at
        first) and the smallest it lost, halve that gap. The bound is the
        largest size it won (0: none). Until every race it rests on is
        settled (module docstring), it is worked out again at each query,
        and those races are appended to `asked` (a list) where given (`won`).
        """
        if not route.token_steps:
            return None
        if (route.name, compute) in self._bounds:
            return self._bounds[route.name, compute]
        rival, raced = self.routes[route.builds_on], []
        won = lambda tokens: self.won(route, rival, compute, "few", tokens, raced)  # noqa: E731
        lost = next((tokens for tokens in route.token_steps if not won(tokens)), None)  # races until one is lost
        bound = max((tokens for tokens in route.token_steps if lost is None or tokens < lost), default=0)
        for _ in range(TOKEN_BISECTIONS if lost else 0):
            middle = (bound + lost) // 2
            if middle in (bound, lost):
                break
            bound, lost = (middle, lost) if won(middle) else (bound, middle)
        if all(self.verdicts.settled(*race) for race in raced):
            self._bounds[route.name, compute] = bound
        elif asked is not None:
            asked.extend(raced)
        return bound


class RouteChoice:
    """The routes of one encoder on one host, their verdicts and the route chosen per request (module docstring).

    Args:
        encoder: a `SentenceEncoder`.
        graphs: its `EncoderGraphs` (shared with the routes).
        host: the `hardware.Host` they run on.
    """

    def __init__(self, encoder, graphs, host):
        self.encoder, self.graphs, self.host = encoder, graphs, host
        self.verdicts = self_check.VerdictTable(encoder, host)
        self.routes = {route.name: route(graphs, host) for route in base.registered()}
        self._choices = {}  # (requested compute, size, exportable only) -> ((route, compute), kept until)
        self._preparing = False  # within `preparing`: routes that are not `ready` take part too
        self._warned = set()  # compute paths run as another (`runnable_compute`), warned about once
        self.races = Races(encoder, self.routes, self.verdicts)

    def computes(self, compute):
        """The resolved compute paths tried for `compute`, in order.

        One for a named path (`runnable_compute`: float16 without a GPU runs
        as another), and float32 after int8: where no int8 route passes its
        check, the fastest float32 route serves. For `"auto"`: int8 first for an encoder quantized by
        Keras, then the host's choice (`resolve_compute`; int8 for such an
        encoder where oneDNN runs int8 matmuls), then float32.
        """
        resolved = runnable_compute(resolve_compute(compute, self.host), self.host, self.encoder, self._warned)
        if compute not in (None, "auto"):
            return [resolved, "float32"] if resolved == "int8" else [resolved]  # int8 falls back to float32
        quantized = self.graphs.quantized()
        if quantized and onednn_int8.int8_matmul_available(self.host):
            resolved = "int8"  # an encoder quantized by Keras runs its int8 weights
        return list(dict.fromkeys(["int8"] * quantized + [resolved, "float32"]))

    def candidates(self, compute, size="batch", exportable=False):
        """`(route, resolved compute)` pairs in the order tried for `size` texts in `compute`.

        For each path of `computes(compute)`, the routes that serve it (`Route.serves`) and
        `size`, usable here (and exportable in it when asked), highest rank first;
        under `"auto"` only those `fast` in it; those that `may_build` now.
        """
        auto, pairs = compute in (None, "auto"), []
        for path in self.computes(compute):
            for route in sorted(self.routes.values(), key=lambda route: -route.rank):
                held = not exportable or path in route.exportable
                served = route.serves(path) and size in route.sizes and held
                if served and (not auto or route.fast(path)) and route.usable() and self.may_build(route, path):
                    pairs.append((route, path))
        return pairs

    def may_build(self, route, compute):
        """Whether `route` may be built for a call now: it is `ready`, or serves no other's calls, or `preparing`."""
        return self._preparing or not route.builds_on or route.ready(compute)

    @contextlib.contextmanager
    def preparing(self):
        """Within it, routes that are not `ready` take part too (`encoder.warmup()`); earlier choices are made again."""
        self._choices.clear()
        self._preparing = True
        try:
            yield
        finally:
            self._preparing = False

    def passes(self, name, compute):
        """Whether route `name` may serve `compute`: the route it builds on passes, and its own verdict (once)."""
        route = self.routes[name]
        if not route.checked:
            return True
        checked_in = route.check_in or compute
        if route.builds_on and not all(self.passes(route.builds_on, c) for c in dict.fromkeys([compute, checked_in])):
            return False
        return self.verdicts.verdict(name, checked_in, lambda: route.check(checked_in))

    def outruns(self, route, compute, size, raced):
        """Whether `route` may serve `size` texts in `compute`, as far as speed goes.

        Always, unless the route `races` others that serve the same and pass
        their checks: then whether it stands won against each (`Races.won`). The route it builds on, where it
        has `token_steps`, is raced per call size instead: it serves if its
        bound is above 0 (`Races.token_bound`). Each race asked is appended
        to `raced` (a list) as `(name, compute)` (a settled bound's: none).
        """
        for name in route.races:
            rival = self.routes.get(name)
            if rival is None or not rival.serves(compute) or size not in rival.sizes or not rival.usable():
                continue
            if (route.token_steps and name == route.builds_on) or not self.passes(rival.name, compute):
                continue
            if not self.races.won(route, rival, compute, size, asked=raced):
                return False
        return not route.token_steps or self.races.token_bound(route, compute, raced) > 0

    def build(self, route, compute):
        """`route`'s `Runner` in `compute`; with `token_steps`, bounded by `Races.token_bound` (asked at each query)."""
        bounded = route.token_steps and (lambda: self.races.token_bound(route, compute))
        return route.build(compute, bounded) if bounded else route.build(compute)

    def select(self, compute="auto", size="batch", exportable=False):
        """`(route, resolved compute)` for `size` texts (`routes.base.SIZES`), kept once its races are settled.

        `exportable`: only routes a SavedModel can hold in the path (the export's `plan`).
        A choice that rests on a race not yet settled is made again
        `RECHOOSE_AFTER` seconds later (module docstring).

        Raises:
            LookupError: no route serves it (`"int8"` with `exportable`).
        """
        key = (compute, size, exportable)
        choice, until = self._choices.get(key, (None, 0.0))
        if choice is not None and time.time() < until:
            return choice
        raced = []
        for route, resolved in self.candidates(compute, size, exportable):
            if self.passes(route.name, resolved) and self.outruns(route, resolved, size, raced):
                break
        else:  # the Keras graph serves every float path, so only a path no route exports gets here
            held = "a SavedModel can hold " if exportable else ""
            raise LookupError(f"no route {held}serves compute={compute!r} for {self.encoder.name!r}.")
        settled = all(self.verdicts.settled(*asked) for asked in raced)
        self._choices[key] = ((route, resolved), math.inf if settled else time.time() + RECHOOSE_AFTER)
        return route, resolved
