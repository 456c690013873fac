import keras
import numpy as np

from sbert_keras import InBatchNegativesLoss
from sbert_keras import TripletLoss


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
    for loss in (TripletLoss(margin=0.3), InBatchNegativesLoss(scale=7.0)):
        clone = keras.losses.deserialize(keras.losses.serialize(loss))
        assert type(clone) is type(loss)
        assert clone.get_config() == loss.get_config()
