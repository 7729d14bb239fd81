"""Noise-aware verdicts: the margin is judged against the spread, and ties are called ties."""

import re

import pytest

from playbook_utils.bench import verdicts
from tests.sentences import libraries, numbers, quoted


def test_spread_is_the_middle_half_for_many_values_and_the_range_for_few():
    assert verdicts.spread_pct([1]) is None
    assert verdicts.spread_pct([90, 110]) == pytest.approx(20.0)
    # 8 values, one wild outlier: the interquartile range ignores it, the range would not
    values = [100, 101, 99, 100, 102, 98, 100, 400]
    assert verdicts.spread_pct(values) < 5
    assert verdicts.spread_pct([0, 0]) is None


def test_a_margin_larger_than_the_spread_names_a_winner():
    v = verdicts.rank([("pyav", 1386, 5.0), ("torchcodec", 1222, 8.0), ("decord", 500, 2.0)])
    assert (v.best, v.runner_up, v.tied) == ("pyav", "torchcodec", False)
    assert v.margin_pct == pytest.approx(100 * (1386 / 1222 - 1))
    assert v.spread_pct == 8.0
    # the best's rate, its margin, the runner-up's rate, the spread; decord, third, unnamed
    assert numbers(v.sentence()) == ["1386", "13", "1222", "8.0"] and libraries(v.sentence()) == ["pyav", "torchcodec"]


def test_a_margin_inside_the_spread_is_a_tie():
    v = verdicts.rank([("pyav", 1386, 20.0), ("torchcodec", 1222, 3.0)])
    assert v.tied and v.best == "pyav"
    # the two rates, then the margin against the spread (a winner's sentence gives the margin before the second rate)
    said = v.sentence()
    assert quoted(said) == ["1,386", "1,222", "13%", "20%"] and libraries(said) == ["pyav", "torchcodec"]


def test_each_label_counts_once_with_its_best_rate_and_unknown_spreads_are_said():
    v = verdicts.rank([("a", 10, None), ("a", 30, None), ("b", 20, None)])
    assert (v.best, v.best_value, v.runner_up) == ("a", 30, "b") and not v.tied
    assert v.spread_pct is None and numbers(v.sentence()) == ["30", "50", "20"]  # no spread to name
    assert verdicts.rank([("a", 10, None), ("b", 9, None)], unknown_spread_ties=True).tied
    alone = verdicts.rank([("a", 10, 1.0)])
    assert alone.runner_up is None and alone.sentence().split(":")[0] == "a" and numbers(alone.sentence()) == ["10"]
    with pytest.raises(ValueError):
        verdicts.rank([])


def test_block_rates_smooth_bursts_into_repeatable_rates():
    # batches that arrive in bursts: two at once, then a long gap; per-event rates spread wildly
    amounts, seconds = [4] * 8, [0.01, 0.39] * 4
    assert verdicts.spread_pct([a / s for a, s in zip(amounts, seconds)]) > 100
    blocks = verdicts.block_rates(amounts, seconds, blocks=4)
    assert blocks == pytest.approx([20.0] * 4) and verdicts.spread_pct(blocks) == pytest.approx(0)
    assert verdicts.block_rates([1, 2], [1, 1], blocks=4) == [1.0, 2.0] and verdicts.block_rates([], []) == []


def test_rounded_keeps_an_unmeasured_spread_unmeasured():
    assert verdicts.rounded(50.750304706622444) == 50.8 and verdicts.rounded(None) is None


def test_small_rates_keep_two_significant_digits_in_the_sentence():
    said = verdicts.rank([("sorted", 1.34, 2.0), ("seek", 1.07, 2.0)]).sentence(unit="requests/s")
    assert quoted(said) == ["1.3", "25%", "1.1", "2.0%"] and re.search(r"(\S+) requests/s", said).group(1) == "1.3"
    said = verdicts.rank([("a", 4610.0, 1.0), ("b", 99.6, 1.0)]).sentence()
    assert quoted(said) == ["4,610", "4529%", "100", "1.0%"] and re.search(r"(\S+) frames/s", said).group(1) == "4,610"


def test_a_margin_without_any_spread_is_not_called_more_than_the_noise():
    sentence = verdicts.rank([("a", 120.0, None), ("b", 100.0, None)]).sentence()
    assert numbers(sentence) == ["120", "20", "100"]  # the rates and the margin; no spread it could be more than


def test_a_small_spread_keeps_its_decimal():
    # "a spread of 0%" says no spread at all; a measured 0.4% is written as such, 10% and up as whole percents
    v = verdicts.rank([("a", 104.0, 0.4), ("b", 100.0, 0.3)])
    assert not v.tied and numbers(v.sentence()) == ["104", "4.0", "100", "0.4"]
    assert verdicts.percent(12.4) == "12%" and verdicts.percent(None) == "0.0%" and verdicts.percent(9.96) == "10%"


def test_a_third_entry_inside_the_spread_is_named_in_the_tie():
    # the H200's smoke run: pynvvideocodec 466 (spread 20%), torchcodec 424 (13%), DALI 400 (3%) were "two tied"
    v = verdicts.rank(
        [("pynvvideocodec", 466, 20.0), ("torchcodec", 424, 13.0), ("dali", 400, 3.0), ("spdl", 174, 3.0)]
    )
    assert v.tied and [t[0] for t in v.also_tied] == ["dali"]
    # the three tied, their rates, the first's margin over the last, the widest spread; spdl unnamed
    assert libraries(v.sentence()) == ["pynvvideocodec", "torchcodec", "dali"]
    assert numbers(v.sentence()) == ["466", "424", "400", "17", "20"]
    # not tied: no third is named; tied, but the third is further off than any spread: the two alone
    assert verdicts.rank([("a", 200, 1.0), ("b", 100, 1.0), ("c", 99, 1.0)]).also_tied == ()
    two = verdicts.rank([("a", 100, 5.0), ("b", 98, 5.0), ("c", 80, 5.0)])
    assert two.tied and two.also_tied == ()
    assert numbers(two.sentence()) == ["100", "98", "2.0", "5.0"]  # a and b, their margin and spread; c's 80 unnamed


def test_a_margin_beyond_the_spread_never_reads_as_equal_to_it():
    # the H200's 20: "1,086 frames/s, 20% ahead of ... (905), more than a spread of 20%" (20.0 against 19.5)
    line = verdicts.rank([("a", 1086, 19.5), ("b", 905, 19.5)]).sentence()
    assert numbers(line) == ["1086", "20.0", "905", "19.5"]
    assert quoted(verdicts.rank([("a", 1000, 3.0), ("b", 800, 2.0)]).sentence()) == ["1,000", "25%", "800", "3.0%"]


def test_memory_growth_per_item_is_told_from_the_allocators_steps():
    """decord's readers on 2 cores: dropped ones moved resident memory in steps of tens of MiB (a line fitted over
    all twelve read +2.2 MiB a reader, 'each holds 6% of the clip'); kept ones held a whole decoded clip each."""
    dropped = [0, 19, 38, 37, 13, 24, 25, 26, 24, 42, 40, 40]
    kept = [38.0, 81.6, 123.8, 165.4, 205.8, 245.1, 282.5, 318.6, 355.1, 388.8, 422.1, 454.0]
    slope, error = verdicts.growth_per_item(dropped)
    assert slope == pytest.approx(1.38, abs=0.01) and error == pytest.approx(1.76, abs=0.01)
    assert not verdicts.grows(slope, error, 40.0)
    said = verdicts.growth_words(slope, error, 40.0)  # the fitted slope and its error against a whole clip; no share
    assert quoted(said) == ["+1.4", "1.8", "40"]  # signed, and none of them a share (%)
    slope, error = verdicts.growth_per_item(kept)
    assert slope == pytest.approx(37.25, abs=0.01) and verdicts.grows(slope, error, 40.0)
    assert verdicts.growth_words(slope, error, 40.0) == "each reader holds about 93% of the whole clip decoded (40 MiB)"
    # a steady leak of 6 MiB a reader, with little noise, is growth; a flat curve is not, nor the highest of fifteen
    # runs of dropped readers here (+3.3 MiB a reader, error 1.7)
    assert verdicts.grows(*verdicts.growth_per_item([10 + 6 * i + (i % 2) for i in range(12)]), 40.0)
    assert not verdicts.grows(3.3, 1.7, 40.0)
    assert not verdicts.grows(*verdicts.growth_per_item([10.0] * 12), 40.0)
    with pytest.raises(ValueError, match="needs 3"):
        verdicts.growth_per_item([1.0, 2.0, 3.0])
