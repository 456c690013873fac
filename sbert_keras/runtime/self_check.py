"""The self-check of fast paths against the float32 Keras graph, and the one table of its verdicts.

Every route but the Keras graph itself proves, on first use, that it
computes what the float32 Keras graph computes: `probe_check` runs both on
a probe batch (`probe_batch`) and compares them with `divergence` against
the gate of the precision (float32: max |diff| <= `FLOAT32_TOLERANCE` of
the vectors' scale; bfloat16 / float16 / int8: a min cosine of
`MIN_COSINE`). A route that fails warns once, naming the model, precision
and divergence, and is not used.

The float paths are probed with seeded random token ids of different
lengths: their error does not depend on what the text says, and random ids
reach every part of the vocabulary. int8 is probed with real sentences
(`int8_quantization.CALIBRATION_SENTENCES`, tokenised by the encoder's
preprocessor): its error follows the activations' ranges, and random token
sequences give activations no text gives, so they would judge int8 by
inputs no user sends (docs/inference.md has the figures).

`QuantizationCheck` holds Keras' own `quantize` to the same gate: the
Keras graph's probe vectors before and after, compared once the weights
are quantized (Keras' int8 layers quantize activations per token, and
which layers a model can afford to quantize depends on the model).

`VerdictTable` is the one place where verdicts live: in memory for the
engine's life and on disk across processes (`cold_start.VerdictCache`), so
each (route, precision) is checked once and a failure warns once. Keras and
KerasHub have no such check, hence this module.
"""

import time
import warnings

import numpy as np

from sbert_keras.runtime import batching
from sbert_keras.runtime import cold_start
from sbert_keras.runtime import graphs
from sbert_keras.runtime.kernels import int8_quantization
from sbert_keras.runtime.kernels import onednn_layer_norm

# Gates of a route against the float32 Keras graph.
FLOAT32_TOLERANCE = 1e-5
MIN_COSINE = {"bfloat16": 0.999, "float16": 0.999, "int8": 0.99}
PROBE_LENGTHS = (2, 5, 9, 17)
# A race timed again (`VerdictTable.race` with `again`): the prefix of each later timing's name, the most
# timings (two of three agree), and the least seconds from the last timing to the second and to the third.
AGAIN, RACE_TIMINGS, RACE_AGAIN_AFTER = "again ", 3, (60.0, 600.0)


def probe_batch(encoder, precision="float32"):
    """Token ids and mask of the probe of `precision`, padded (module docstring).

    Random token ids of `PROBE_LENGTHS` (seeded); for int8, the sentences
    of `int8_quantization.CALIBRATION_SENTENCES` where the encoder has a preprocessor.
    """
    if precision == "int8" and encoder.preprocessor is not None:
        return sentence_batch(encoder, int8_quantization.CALIBRATION_SENTENCES)
    backbone = encoder.backbone
    width = min(max(PROBE_LENGTHS), backbone.max_sequence_length)
    lengths = np.minimum(PROBE_LENGTHS, width)
    rng = np.random.default_rng(0)
    token_ids = rng.integers(0, backbone.vocabulary_size, (len(lengths), width)).astype("int32")
    mask = (np.arange(width)[None, :] < lengths[:, None]).astype("int32")
    return token_ids * mask, mask


def sentence_batch(encoder, texts):
    """`(token_ids, padding_mask)` of `texts` tokenised by `encoder.preprocessor`, padded to the longest."""
    rows, _ = encoder.preprocessor.tokenize(list(texts))
    lengths, token_ids = batching.lengths_and_matrix(rows, encoder.preprocessor.tokenizer.pad_token_id)
    return token_ids, (np.arange(token_ids.shape[1])[None, :] < lengths[:, None]).astype("int32")


def divergence(reference, candidate, precision):
    """`(measure, value, passed)` of `candidate` against the float32 reference."""
    if precision == "float32":
        scale = max(float(np.abs(reference).max()), 1e-6)
        value = float(np.abs(candidate - reference).max()) / scale
        return "max |diff| / scale", value, value <= FLOAT32_TOLERANCE
    norms = np.linalg.norm(reference, axis=1) * np.linalg.norm(candidate, axis=1)
    value = float(((reference * candidate).sum(1) / np.maximum(norms, 1e-12)).min())
    return "min cosine", value, value >= MIN_COSINE[precision]


def probe_check(encoder, reference_run, fused_run, precision, name="fused inference graph", fallback="Keras graph"):
    """Whether `fused_run` computes what `reference_run` does; warns if not.

    Both run the probe batch and that batch repeated into one that takes
    the fused graph's large-batch kernels (`onednn_layer_norm.FUSED_LAYER_NORM_MIN_ROWS`);
    `divergence` against the gate of `precision` decides. `name` and
    `fallback` name the checked path and what serves instead in the warning.
    """
    token_ids, mask = probe_batch(encoder, precision)
    reference = np.asarray(reference_run(token_ids, mask))
    repeat = -(-onednn_layer_norm.FUSED_LAYER_NORM_MIN_ROWS // token_ids.size)
    large = np.asarray(fused_run(np.tile(token_ids, (repeat, 1)), np.tile(mask, (repeat, 1))))
    candidate = np.concatenate([np.asarray(fused_run(token_ids, mask)), large])
    reference = np.concatenate([reference, np.tile(reference, (repeat, 1))])
    measure, value, passed = divergence(reference, candidate, precision)
    if not passed:
        warnings.warn(
            f"The {name} of {encoder.name!r} in {precision} "
            f"diverges from the Keras graph ({measure} = {value:.3g} on the probe "
            f"batch); using the {fallback} instead.",
            stacklevel=4,
        )
    return passed


class QuantizationCheck:
    """The probe sentences' vectors of an encoder's float Keras graph, to compare after Keras quantizes it.

    Args:
        encoder: a `SentenceEncoder`, not yet quantized by Keras.

    Example:
    ```python
    check = QuantizationCheck(encoder)
    keras.Model.quantize(encoder, "int8")
    check.passes("int8")  # False, with a warning, when the min cosine is under 0.99
    ```
    """

    def __init__(self, encoder):
        self.encoder = encoder
        self.probe = probe_batch(encoder, "int8")
        self.reference = np.asarray(graphs.keras_forward(encoder)(*self.probe))

    def passes(self, mode):
        """Whether the quantized encoder's probe vectors keep int8's gate; warns once if not.

        Args:
            mode: str. The quantization mode, named in the warning.
        """
        quantized = np.asarray(graphs.keras_forward(self.encoder)(*self.probe))
        measure, value, passed = divergence(self.reference, quantized, "int8")
        if not passed:
            warnings.warn(
                f"quantize({mode!r}) moved the vectors of {self.encoder.name!r} away from its float weights' "
                f"({measure} = {value:.3g} on the probe sentences, under the int8 gate "
                f"{MIN_COSINE['int8']}). Quantize fewer layers (`filters=`), or keep the float model and "
                "encode with compute='int8', which checks itself and falls back to float32.",
                stacklevel=3,
            )
        return passed


def standing(timings):
    """Whether a race stands won after `timings` (`VerdictTable.race`): the first alone; two, if both won; the third."""
    return all(timings) if len(timings) == 2 else timings[-1]


class VerdictTable:
    """The self-check verdicts of one engine: `(route name, precision) -> bool`, each checked once.

    Args:
        encoder: the `SentenceEncoder` whose routes are checked.
        host: the `hardware.Host` the verdicts hold for (part of the on-disk key).

    Example:
    ```python
    table = VerdictTable(encoder, host)
    table.verdict("fused", "bfloat16", check)  # runs `check()` once, then remembers
    table.get("fused", "bfloat16")  # True / False, or None before the check
    ```
    """

    def __init__(self, encoder, host=None):
        self.cache = cold_start.VerdictCache(encoder, host)
        self._verdicts = {}
        self._races = {}  # (race, precision) -> its timings so far, first first (`timings`)
        self._raced_at = {}  # (race, precision) -> when it was last timed, at the latest (seconds since the epoch)

    def get(self, name, precision):
        """The verdict of route `name` in `precision` in this process (a race: `standing`), or None."""
        timings = self._races.get((name, precision))
        return standing(timings) if timings else self._verdicts.get((name, precision))

    def race(self, name, precision, measure, again=None):
        """Whether the race `name` in `precision` stands won: remembered, stored on disk, or `measure()` now.

        A lost race is no failure: unlike `verdict`, nothing warns. The
        race is a route against its rival, the route that serves otherwise.

        Args:
            name: str. The race (the key on disk).
            precision: str.
            measure: callable returning whether it was won.
            again: None (one timing stands), or a callable saying whether
                `measure()` is cheap now. Then the race is timed again, won
                or lost, until two of its timings agree (`settled`), at a
                call where `again()` says so, in this process or a later
                one: the second timing at least `RACE_AGAIN_AFTER[0]`
                seconds after the first, and where the two disagree a third
                at least `RACE_AGAIN_AFTER[1]` after the second. Until then
                one timing stands as timed, and two that disagree stand
                lost (`standing`). The i-th is kept as `AGAIN * i + name`.
        """
        timings, key = self.timings(name, precision), (name, precision)
        if not timings or (again is not None and self._due(key) and again()):
            timings.append(bool(measure()))
            self._raced_at[key] = time.time()
            self.cache.put(AGAIN * (len(timings) - 1) + name, precision, timings[-1])
        return standing(timings)

    def _due(self, key):
        """Whether the race `key` may be timed again now: unsettled, and long enough after its last timing."""
        timings = self.timings(*key)
        return not self.settled(*key) and time.time() - self._raced_at[key] >= RACE_AGAIN_AFTER[len(timings) - 1]

    def timings(self, name, precision):
        """The timings of the race `name` in `precision` so far, first first (read from disk once; `race`)."""
        key = (name, precision)
        if key not in self._races:
            stored = self.cache.get_all([AGAIN * i + name for i in range(RACE_TIMINGS)], precision) + [None]
            self._races[key] = stored[: stored.index(None)]
            if self._races[key]:
                self._raced_at[key] = self.cache.written_at() or time.time()  # stored then or before
        return self._races[key]

    def settled(self, name, precision):
        """Whether the race `name` stands as it will: two of its timings agree (`race` with `again`)."""
        timings = self.timings(name, precision)
        return timings.count(timings[-1]) > 1 if timings else False

    def verdict(self, name, precision, check):
        """Whether route `name` passes in `precision`: remembered, stored on disk, or `check()` now.

        Args:
            name: str. The route's name (the key on disk, e.g. `"fused"`).
            precision: str.
            check: callable returning whether the route passes (it warns when not).
        """
        key = (name, precision)
        if key not in self._verdicts:
            self._verdicts[key] = self.cache.verdict(name, precision, check)
        return self._verdicts[key]
