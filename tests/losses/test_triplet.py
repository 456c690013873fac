import keras
import numpy as np
import pytest

from harness import MIXED_POLICIES
from harness import assert_float32_and_finite
from harness import dtype_policy
from harness import run_serialization_test
from sbert_keras import InBatchNegativesLoss
from sbert_keras import TripletLoss
from sbert_keras.losses.triplet import triplet_settings
from sbert_keras.utils import defaults


def test_triplet_loss_matches_hand_computed_values():
    distances = np.array([[0.5, 2.0], [1.0, 1.2], [3.0, 1.0]], "float32")
    # max(d_ap - d_an + 1, 0): 0, 0.8, 3.0 -> mean 1.2666...
    expected = np.mean([max(0.5 - 2.0 + 1, 0), max(1.0 - 1.2 + 1, 0), max(3.0 - 1.0 + 1, 0)])
    np.testing.assert_allclose(float(TripletLoss(margin=1.0)(None, distances)), expected, rtol=1e-6)
    np.testing.assert_allclose(float(TripletLoss(margin=0.0)(None, distances)), 2.0 / 3, rtol=1e-6)


def test_in_batch_negatives_loss_matches_numpy():
    rng = np.random.default_rng(0)
    sims = rng.uniform(-1, 1, size=(4, 8)).astype("float32")
    logits = 20.0 * sims
    logits = logits - logits.max(1, keepdims=True)
    log_softmax = logits - np.log(np.exp(logits).sum(1, keepdims=True))
    expected = -np.mean(log_softmax[np.arange(4), np.arange(4)])
    got = float(InBatchNegativesLoss(scale=20.0)(np.zeros(4), sims))
    np.testing.assert_allclose(got, expected, rtol=1e-5)


def test_losses_serialize_with_their_hyperparameters():
    assert run_serialization_test(TripletLoss(margin=0.3)).margin == 0.3
    assert run_serialization_test(InBatchNegativesLoss(scale=7.0)).scale == 7.0


def test_default_hyperparameters_are_the_shared_defaults():
    assert TripletLoss().margin == defaults.TRIPLET_MARGIN == 1.0
    assert InBatchNegativesLoss().scale == defaults.IN_BATCH_SCALE == 20.0


@pytest.mark.parametrize("policy", MIXED_POLICIES)
@pytest.mark.parametrize("loss_class", [TripletLoss, InBatchNegativesLoss])
def test_losses_are_float32_under_mixed_policies(loss_class, policy):
    # Values whose softmax/relu would overflow in float16: the loss casts to float32 first.
    with dtype_policy(policy) as active:
        values = keras.ops.cast(np.array([[3000.0, -3000.0], [-3000.0, 3000.0]]), active.compute_dtype)
        assert_float32_and_finite(loss_class()(None, values), f"{loss_class.__name__} under {policy}")


def test_triplet_settings_resolve_from_normalisation_and_let_explicit_values_win():
    assert triplet_settings(False) == ("euclidean", 1.0)
    assert triplet_settings(True) == ("cosine", defaults.TRIPLET_COSINE_MARGIN)
    assert triplet_settings(True, distance="euclidean") == ("euclidean", defaults.TRIPLET_MARGIN)
    assert triplet_settings(False, distance="cosine") == ("cosine", defaults.TRIPLET_COSINE_MARGIN)
    assert triplet_settings(True, margin=0) == ("cosine", 0.0)
    assert triplet_settings(False, "manhattan", 2) == ("manhattan", 2.0)
    with pytest.raises(ValueError, match="`distance` must be one of .* Received 'dot'"):
        triplet_settings(True, distance="dot")
