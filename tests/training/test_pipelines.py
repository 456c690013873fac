import numpy as np
import pytest

from conftest import tiny_encoder
from sbert_keras import ContrastiveSiamese
from sbert_keras import RegressionSiamese
from sbert_keras import TripletSiamese
from sbert_keras.training.pipelines import bucket_batch_count
from sbert_keras.training.pipelines import bucket_boundaries
from sbert_keras.training.pipelines import no_duplicate_batches
from sbert_keras.training.pipelines import row_lengths
from sbert_keras.training.pipelines import siamese_dataset
from sbert_keras.training.pipelines import split_to_count
from sbert_keras.training.pipelines import text_codes
from sbert_keras.utils.defaults import BUCKETS

SHORT = ["a cat", "a dog", "the sky", "a car"] * 6
LONG = ["a man is playing guitar in the park on the sofa"] * 24


def batches(ds):
    return [(x, y) for x, y in ds.as_numpy_iterator()]


def test_bucket_boundaries_are_few_and_cover_the_max_length():
    assert bucket_boundaries(256) == [b + 1 for b in BUCKETS if b <= 256]
    assert bucket_boundaries(12)[-1] == 13


def test_batches_are_padded_to_bucket_lengths_not_to_the_max():
    encoder = tiny_encoder(sequence_length=64)
    a = SHORT + ["a man is playing guitar in the park"] * 24
    b = list(reversed(a))
    ds = siamese_dataset([a, b], np.zeros(48), encoder.preprocessor, ("sentence_a", "sentence_b"), batch_size=8, seed=1)
    widths = set()
    total = 0
    for x, y in batches(ds):
        total += len(y)
        for key, value in x.items():
            if key.endswith("token_ids"):
                widths.add(value.shape[1])
                mask = x[key.replace("token_ids", "padding_mask")]
                assert np.all((value != encoder.preprocessor.tokenizer.pad_token_id) == mask)
    assert total == 48
    assert widths <= set(BUCKETS) and max(widths) < 64


def test_features_match_the_fixed_length_preprocessor():
    encoder = tiny_encoder()
    ds = siamese_dataset(
        [SHORT[:4], SHORT[1:5]],
        [1, 2, 3, 4],
        encoder.preprocessor,
        ("sentence_a", "sentence_b"),
        batch_size=4,
        shuffle=False,
    )
    x, y = batches(ds)[0]
    model = RegressionSiamese(encoder)
    np.testing.assert_allclose(
        model.predict(x, verbose=0), model.predict((np.array(SHORT[:4]), np.array(SHORT[1:5])), verbose=0), atol=1e-6
    )
    np.testing.assert_array_equal(y, [1, 2, 3, 4])


def test_seeded_shuffle_is_reproducible_and_reshuffles_each_epoch():
    encoder = tiny_encoder()
    labels = np.arange(24, dtype="float32")

    def make():
        roles = ("sentence_a", "sentence_b")
        return siamese_dataset(
            [SHORT, SHORT], labels, encoder.preprocessor, roles, batch_size=4, seed=3, batching="shuffle"
        )

    first = np.concatenate([y for _, y in batches(make())])
    again = np.concatenate([y for _, y in batches(make())])
    np.testing.assert_array_equal(first, again)
    assert sorted(first) == list(labels) and not np.array_equal(first, labels)


def test_fit_on_bucketed_dataset_and_triplets_without_labels():
    encoder = tiny_encoder()
    model = TripletSiamese(encoder)
    model.compile()
    ds = siamese_dataset(
        [SHORT[:8], SHORT[1:9], LONG[:8]], None, encoder.preprocessor, model.active_roles, batch_size=4, seed=0
    )
    history = model.fit(ds, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])


def test_bad_columns_are_clear_errors():
    encoder = tiny_encoder()
    roles = ("sentence_a", "sentence_b")
    with pytest.raises(ValueError, match="Expected 2 text columns"):
        siamese_dataset([SHORT], None, encoder.preprocessor, roles)
    with pytest.raises(ValueError, match="'sentence_b' has 3 texts"):
        siamese_dataset([SHORT[:4], SHORT[:3]], None, encoder.preprocessor, roles)
    with pytest.raises(ValueError, match=r"sentence_b texts\[1\]"):
        siamese_dataset([SHORT[:2], ["ok", None]], None, encoder.preprocessor, roles)


# NLI-like triplets: each premise has 3 rows (one per entailment), one
# hypothesis text also reappears as a negative elsewhere.
PREMISES = [f"premise number {i // 3}" for i in range(60)]
ENTAILED = [f"entailed {i}" + " long" * (i % 9) for i in range(60)]
CONTRADICTED = [f"contradicted {i // 2}" for i in range(59)] + ["entailed 0"]


def planned_rows(ds):
    """Row ids (the labels) per batch, over one pass."""
    return [y.astype(int).tolist() for _, y in ds.as_numpy_iterator()]


def no_duplicates_dataset(encoder, seed=0, batching="no_duplicates", **kwargs):
    roles = ("anchor", "positive", "negative")
    columns = [PREMISES, ENTAILED, CONTRADICTED]
    labels = np.arange(60, dtype="float32")
    return siamese_dataset(
        columns, labels, encoder.preprocessor, roles, batch_size=8, seed=seed, batching=batching, **kwargs
    )


def repeated_texts(batch):
    texts = [t for i in batch for t in {PREMISES[i], ENTAILED[i], CONTRADICTED[i]}]
    return len(texts) - len(set(texts))


def test_no_duplicates_batches_repeat_no_text_and_use_every_row_once():
    encoder = tiny_encoder(sequence_length=64)
    ds = no_duplicates_dataset(encoder)
    for epoch in range(2):
        plan = planned_rows(ds)
        assert sorted(i for batch in plan for i in batch) == list(range(60)), epoch
        assert all(repeated_texts(batch) == 0 for batch in plan), epoch
        assert sum(len(b) == 8 for b in plan) >= 6
    # The plain random batches of the same rows do repeat premises.
    assert sum(repeated_texts(batch) for batch in planned_rows(no_duplicates_dataset(encoder, batching="shuffle")))


def test_no_duplicates_plan_is_deterministic_per_seed_and_reshuffles_each_epoch():
    encoder = tiny_encoder(sequence_length=64)
    ds = no_duplicates_dataset(encoder, seed=5)
    first, second = planned_rows(ds), planned_rows(ds)
    again = no_duplicates_dataset(encoder, seed=5)
    assert planned_rows(again) == first and planned_rows(again) == second
    assert first != second
    assert planned_rows(no_duplicates_dataset(encoder, seed=6)) != first


def test_planned_batches_pad_to_bucket_lengths_across_roles():
    encoder = tiny_encoder(sequence_length=64)
    for batching in ("no_duplicates", "shuffle"):
        for x, _ in no_duplicates_dataset(encoder, batching=batching).as_numpy_iterator():
            widths = {v.shape[1] for k, v in x.items() if k.endswith("token_ids")}
            assert len(widths) == 1 and widths <= set(BUCKETS), batching
            for key, value in x.items():
                if key.endswith("token_ids"):
                    mask = x[key.replace("token_ids", "padding_mask")]
                    assert np.all((value != encoder.preprocessor.tokenizer.pad_token_id) == mask)


def test_no_duplicate_batches_defers_conflicts_and_closes_short_batches():
    codes = text_codes([["a", "a", "b"], ["x", "y", "z"]])
    batches = no_duplicate_batches(codes, 2, np.arange(3))
    assert [b.tolist() for b in batches] == [[0, 2], [1]]
    # One text in every row: each row must go to its own batch.
    same = text_codes([["q"] * 3, ["r", "s", "t"]])
    assert [b.tolist() for b in no_duplicate_batches(same, 2, np.array([2, 0, 1]))] == [[2], [0], [1]]
    # A row may repeat a text within itself.
    assert [b.tolist() for b in no_duplicate_batches(text_codes([["a", "b"], ["a", "c"]]), 2, np.arange(2))] == [[0, 1]]


def test_fit_on_no_duplicates_dataset_with_in_batch_negatives():
    encoder = tiny_encoder()
    model = ContrastiveSiamese(encoder, hard_negatives=True)
    model.compile()
    history = model.fit(no_duplicates_dataset(encoder), epochs=2, verbose=0)
    assert np.all(np.isfinite(history.history["loss"]))


def test_unknown_batching_is_a_clear_error():
    encoder = tiny_encoder()
    with pytest.raises(ValueError, match="`batching` must be one of .* Received 'sorted'"):
        siamese_dataset([SHORT], None, encoder.preprocessor, ("anchor",), batching="sorted")


def test_in_batch_negatives_default_to_no_duplicates_and_others_to_buckets():
    encoder = tiny_encoder(sequence_length=64)
    roles = ("anchor", "positive", "negative")
    labels = np.arange(60, dtype="float32")

    def rows(**kwargs):
        columns = [PREMISES, ENTAILED, CONTRADICTED]
        return planned_rows(siamese_dataset(columns, labels, encoder.preprocessor, roles, 8, seed=2, **kwargs))

    assert rows(objective="contrastive") == rows(batching="no_duplicates")
    assert rows(objective="triplet") == rows(batching="bucket") == rows()
    assert rows(objective="contrastive", batching="shuffle") == rows(batching="shuffle")


def passes(ds, count):
    """The label rows of `count` passes over `ds`."""
    return [planned_rows(ds) for _ in range(count)]


@pytest.mark.parametrize("batching", ["bucket", "shuffle", "no_duplicates"])
def test_every_batching_states_the_batches_of_each_pass(batching):
    encoder = tiny_encoder(sequence_length=64)
    long_rows = [f"entailed {i}" + " long" * 40 for i in range(60)]  # past the first buckets
    columns = [PREMISES, ENTAILED[:30] + long_rows[:30], CONTRADICTED]
    roles = ("anchor", "positive", "negative")
    labels = np.arange(60, dtype="float32")
    ds = siamese_dataset(columns, labels, encoder.preprocessor, roles, 8, seed=1, batching=batching, epochs=3)
    count = int(ds.cardinality())
    assert count > 0  # known: Keras' progress bar has its total
    for plan in passes(ds, 3):
        assert len(plan) == count
        assert sorted(i for batch in plan for i in batch) == list(range(60))
    lengths = row_lengths(columns, encoder.preprocessor)
    assert lengths.shape == (60,) and lengths.max() <= 64
    if batching == "bucket":
        assert count == bucket_batch_count(lengths, 64, 8) > -(-60 // 8)  # partial batches in several buckets


def test_no_duplicates_passes_planned_ahead_share_one_count():
    encoder = tiny_encoder(sequence_length=64)
    codes = text_codes([PREMISES, ENTAILED, CONTRADICTED])
    drawn = [len(no_duplicate_batches(codes, 8, np.random.default_rng([0, p]).permutation(60))) for p in range(2)]
    assert drawn == [9, 8]  # seed 0 draws plans of different lengths

    def dataset(**kwargs):
        return no_duplicates_dataset(encoder, seed=0, **kwargs)

    assert int(dataset(epochs=2).cardinality()) == 9
    for plan in passes(dataset(epochs=2), 2):  # the second plan's largest batch is split in two
        assert len(plan) == 9 and all(repeated_texts(batch) == 0 for batch in plan)
        assert sorted(i for batch in plan for i in batch) == list(range(60))
    # Without `epochs`, the plans keep their own lengths and the count is unknown.
    unplanned = dataset()
    assert int(unplanned.cardinality()) < 0 and [len(p) for p in passes(unplanned, 2)] == [9, 8]


def test_split_to_count_splits_the_largest_and_warns_before_dropping():
    batches = [np.arange(8), np.arange(8, 11), np.arange(11, 16)]
    split = split_to_count(batches, 4)
    assert [b.tolist() for b in split] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10], [11, 12, 13, 14, 15]]
    with pytest.warns(UserWarning, match="its last 1 batch\\(es\\), 5 row\\(s\\), are left out"):
        assert len(split_to_count(batches, 2)) == 2


@pytest.mark.parametrize("batching", ["bucket", "shuffle", "no_duplicates"])
def test_passes_are_fixed_by_the_seed_and_their_index_whatever_ran_before(batching):
    """A resumed run builds `passes=range(k, epochs)`: it sees the batches an uninterrupted run saw."""
    encoder = tiny_encoder(sequence_length=64)
    long_rows = [f"entailed {i}" + " long" * 40 for i in range(60)]
    columns = [PREMISES, ENTAILED[:30] + long_rows[:30], CONTRADICTED]
    roles = ("anchor", "positive", "negative")
    labels = np.arange(60, dtype="float32")

    def dataset(first):
        return siamese_dataset(
            columns, labels, encoder.preprocessor, roles, 8, seed=1, batching=batching, epochs=3, passes=range(first, 3)
        )

    whole, resumed = dataset(0), dataset(1)
    steps = int(whole.cardinality()) // 3
    assert int(resumed.cardinality()) == 2 * steps
    every = planned_rows(whole)
    assert every == planned_rows(whole)  # each iteration: the same passes again
    assert planned_rows(resumed) == every[steps:]
    assert every[:steps] != every[steps : 2 * steps]  # a new order each pass
    for p in range(3):
        assert sorted(i for batch in every[p * steps : (p + 1) * steps] for i in batch) == list(range(60))
