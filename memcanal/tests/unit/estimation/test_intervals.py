"""Error bars of sampled estimates and the adaptive rate: coverage of
the stated intervals on binomial draws and on the hash's own samples,
and the rate policy's bounds."""

import numpy as np
import pytest

from memcanal.estimation import intervals
from memcanal.estimation import mrc


def test_z_score_at_95_percent():
    assert intervals.z_score() == pytest.approx(1.959964, abs=1e-6)
    with pytest.raises(ValueError):
        intervals.z_score(1.0)


@pytest.mark.parametrize('rate', [0.01, 0.1, 0.5, 0.9])
@pytest.mark.parametrize('pages', [200, 650, 5000])
def test_count_interval_covers_binomial_draws(rate, pages):
    counts = np.random.default_rng(7).binomial(pages, rate, 4000)
    low, high = intervals.count_interval(counts, rate)
    covered = np.mean((low <= pages) & (pages <= high))
    assert 0.925 <= covered <= 0.985


def test_count_interval_covers_the_hash_sample_of_scattered_pages():
    rng = np.random.default_rng(3)
    universe = 1 << 20
    hits = 0
    for _ in range(300):
        pages = np.unique(rng.integers(0, universe, 800))
        count = mrc.shards_sample(pages, 0.05).size
        low, high = intervals.count_interval(count, 0.05)
        hits += low <= pages.size <= high
    assert hits / 300 >= 0.92


def test_count_interval_at_rate_one_and_at_zero():
    low, high = intervals.count_interval(37, 1.0)
    assert (low, high) == (37, 37)
    low, high = intervals.count_interval(0, 0.01)
    assert low == 0 and high > 300      # nothing seen: up to z^2 / r


def test_count_interval_is_never_below_the_pages_seen():
    low, high = intervals.count_interval(np.array([1, 2, 5]), 0.5)
    assert np.all(low >= [1, 2, 5]) and np.all(high > [2, 4, 10])


def test_count_interval_s_systematic_term_lowers_the_low_end_only():
    low, high = intervals.count_interval(np.array([37, 5]), 1.0,
                                         systematic=20)
    np.testing.assert_array_equal(low, [17, 0])     # never below 0
    np.testing.assert_array_equal(high, [37, 5])
    plain = intervals.count_interval(300, 0.5)
    lowered = intervals.count_interval(300, 0.5, systematic=20)
    assert lowered == (plain[0] - 20, plain[1])
    assert intervals.bytes_interval(37, 1.0, 4096, systematic=20) == [
        17 * 4096, 37 * 4096]


def test_count_interval_narrows_with_the_rate():
    wide = np.subtract(*intervals.count_interval(10, 0.01)[::-1])
    narrow = np.subtract(*intervals.count_interval(500, 0.5)[::-1])
    assert narrow < wide / 10


def test_bytes_interval_holds_the_estimate():
    low, high = intervals.bytes_interval(17, 0.03, 4096)
    assert low <= round(17 / 0.03) * 4096 <= high
    assert low % 4096 == 0 and high % 4096 == 0


def test_ratio_interval_covers_the_population_ratio():
    rng = np.random.default_rng(11)
    population = 20000
    events = rng.integers(1, 6, population)
    # Pages differ: a third miss on every touch, the rest never.
    misses = np.where(rng.random(population) < 0.33, events, 0)
    truth = misses.sum() / events.sum()
    hits = 0
    for _ in range(300):
        kept = rng.random(population) < 0.02
        ratio, low, high = intervals.ratio_interval(
            events[kept], misses[kept][None, :], 0.02)
        hits += low[0] <= truth <= high[0]
    assert hits / 300 >= 0.92


def test_ratio_interval_of_pages_that_agree_is_not_zero_wide():
    ratio, low, high = intervals.ratio_interval([3, 3, 3], [[0, 0, 0]], 0.01)
    assert ratio[0] == 0 and low[0] == 0 and high[0] > 0.3
    ratio, low, high = intervals.ratio_interval([3, 3, 3], [[0, 0, 0]], 1.0)
    assert high[0] == 0


def test_needed_rate_meets_the_target_error():
    for pages in (300, 650, 15000):
        rate = intervals.needed_rate(pages, 0.05)
        low, high = intervals.count_interval(rate * pages, rate)
        assert high / pages - 1 == pytest.approx(0.05, rel=0.1)
        assert 1 - low / pages == pytest.approx(0.05, rel=0.1)
    assert intervals.needed_rate(0, 0.05) == 1.0
    assert intervals.needed_rate(15000, 0.05) < 0.1


def test_ladder_rate_rounds_to_rungs_within_bounds():
    assert intervals.ladder_rate(0.3, 0.01, 1.0) == pytest.approx(0.5 ** 1.5)
    assert intervals.ladder_rate(0.3, 0.01, 1.0, down=True) == \
        pytest.approx(0.25)
    assert intervals.ladder_rate(1e-5, 0.01, 1.0) == 0.01
    assert intervals.ladder_rate(2.0, 0.01, 0.5) == 0.5
    with pytest.raises(ValueError):
        intervals.ladder_rate(0.1, 0.5, 0.2)


def test_choose_rate_follows_the_working_set_and_the_budget():
    small = intervals.choose_rate(None, 300, 0.05, 0.01, 1.0)
    large = intervals.choose_rate(None, 30000, 0.05, 0.01, 1.0)
    assert small > 0.5 and large < 0.1
    assert intervals.needed_rate(300, 0.05) <= small
    # 1000 first touches a second, 50 of them may be sampled.
    budgeted = intervals.choose_rate(None, 300, 0.05, 0.01, 1.0,
                                     touches_per_s=1000, vm_budget=50)
    assert budgeted <= 0.05
    # The floor wins over the budget.
    assert intervals.choose_rate(None, 300, 0.05, 0.02, 1.0,
                                 touches_per_s=1e6, vm_budget=1) == 0.02


def test_choose_rate_rises_at_once_and_falls_two_rungs_at_a_time():
    rate = intervals.choose_rate(None, 5000, 0.05, 0.01, 1.0)
    slightly_larger = 5000 * 1.5
    assert intervals.choose_rate(rate, slightly_larger, 0.05, 0.01,
                                 1.0) == rate
    much_larger = 5000 * 3
    assert intervals.choose_rate(rate, much_larger, 0.05, 0.01,
                                 1.0) < rate
    assert intervals.choose_rate(rate, 1000, 0.05, 0.01, 1.0) > rate


def test_fit_host_budget_scales_down_to_rungs():
    rates = {'a': 0.5, 'b': 0.25}
    touches = {'a': 1000.0, 'b': 2000.0}
    assert intervals.fit_host_budget(rates, touches, None, 0.01, 1.0) == \
        rates
    assert intervals.fit_host_budget(rates, touches, 5000, 0.01, 1.0) == \
        rates
    fitted = intervals.fit_host_budget(rates, touches, 500, 0.01, 1.0)
    assert sum(fitted[vm] * touches[vm] for vm in rates) <= 500
    assert fitted['a'] > fitted['b']
    floored = intervals.fit_host_budget(rates, touches, 1, 0.1, 1.0)
    assert floored == {'a': 0.1, 'b': 0.1}
