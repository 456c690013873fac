"""benchmarks/train_steps.py: the FLOP and timing accounting (no model, no data)."""

import sys

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import train_steps  # noqa: E402


def test_forward_flops_sum_both_columns_of_every_row():
    widths = [[2, 3], [4, 4]]
    assert train_steps.step_forward_flops(lambda w: 10 * w, widths, batch_size=16) == [16 * 50, 16 * 80]


def test_the_window_leaves_out_the_warmup_steps():
    bounds = [(0.0, 5.0), (5.0, 6.0), (6.5, 7.5), (7.5, 9.5)]
    timing = train_steps.window_timing(bounds, warmup=1)
    assert timing["timed_steps"] == [2, 4]
    assert timing["timed_seconds"] == pytest.approx(4.5)  # start of step 2 to the end of step 4
    assert timing["steps_per_second"] == pytest.approx(3 / 4.5)
    assert timing["median_step_seconds"] == pytest.approx(1.0)
    assert timing["total_seconds"] == pytest.approx(9.5)
    assert timing["step_seconds"] == pytest.approx([5.0, 1.0, 1.0, 2.0])
    with pytest.raises(ValueError):
        train_steps.window_timing(bounds, warmup=4)


def test_training_counts_three_forwards_of_the_timed_steps_against_each_peak():
    forward = [1e9, 2e9, 2e9]  # the first step is warm-up
    figures = train_steps.flop_figures(forward, warmup=1, timed_seconds=2.0, peaks={"bf16": 12.0}, prefix="useful_")
    assert figures == {"useful_train_gflops_per_second": 6.0, "useful_fraction_of_bf16_peak": 0.5}


def test_the_summary_gives_the_ratio_against_the_target():
    ours = {"steps_per_second": 3.0, "fraction_of_bf16_peak": 0.5, "peak_rss_mb": 10.0, "contended": False}
    fields = train_steps.summary_fields(ours, {"steps_per_second": 2.0, "peak_rss_mb": 5.0})
    assert fields["ratio_steps_per_second_ours_over_peer"] == pytest.approx(1.5) and fields["meets_target"] is True
    assert fields["peer_peak_rss_mb"] == 5.0 and fields["peer_fraction_of_bf16_peak"] is None
    failed = train_steps.summary_fields(ours, {"error": "not installed"})
    assert failed["ratio_steps_per_second_ours_over_peer"] is None and failed["meets_target"] is None
