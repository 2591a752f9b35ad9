"""Sampled-access estimators: working sets, the fault-rate curve and the
cold-page feed, against workloads whose truth is known."""

import numpy as np
import pytest

from memcanal.estimation import coldpages
from memcanal.estimation import mrc
from memcanal.estimation import sampling
from memcanal.estimation import traces
from memcanal.estimation import workloads

PAGE = 4096
VM_PAGES = 100_000


def accesses(rate, salt=mrc.DEFAULT_SALT, **kwargs):
    kwargs.setdefault('window_intervals', 1)
    return sampling.SampledAccesses(VM_PAGES, rate, salt, 1.0, **kwargs)


def fed(sets, rate, **kwargs):
    """SampledAccesses fed ``sets`` [(touched, written)] one a second;
    with it, its working set after each interval."""
    sampled = accesses(rate, **kwargs)
    per_interval = []
    for touched, written in sets:
        sampled.add_interval(touched, written, False, 1.0)
        per_interval.append(sampled.wss_bytes())
    return sampled, np.array(per_interval)


def stream_sets(pages, per_interval, writes=None):
    """A reference stream cut into intervals of ``per_interval``."""
    trace = traces.Trace.of(pages, writes)
    return sampling.interval_sets(trace, per_interval)


def cyclic_sets(footprint, cycle, intervals):
    """A loop over ``footprint`` pages, a ``cycle``-th of it per
    interval: every page is reused after exactly ``cycle`` intervals."""
    block = footprint // cycle
    return [(np.arange(i % cycle * block, (i % cycle + 1) * block), ())
            for i in range(intervals)]


def test_the_sample_is_sample_mask_s_and_beyond_the_vm_too():
    sampled = sampling.SampledAccesses(1000, 0.1, salt=7)
    pages = np.arange(50_000)
    expected = np.flatnonzero(mrc.sample_mask(50_000, 0.1, salt=7))
    np.testing.assert_array_equal(sampled.sample(pages), expected)


def test_a_cyclic_loop_faults_below_its_footprint_and_never_above():
    sampled, _ = fed(cyclic_sets(4000, 4, 40), 1.0, curve_intervals=8,
                     max_reuse=6)
    curve = sampled.curve()
    # WSS(T) = T blocks of 1000 up to the loop; each page returns after
    # exactly 4 intervals.
    np.testing.assert_array_equal(curve.sizes, [1000, 2000, 3000, 4000])
    np.testing.assert_array_equal(curve.miss_ratios, [1, 1, 1, 0])
    assert curve.references == 8 * 1000
    assert sampled.wss_bytes() == 1000 * PAGE
    assert sampled.touches_per_s() == 1000.0


@pytest.mark.parametrize('rate', [0.01, 0.1])
def test_a_sampled_cyclic_loop_has_the_same_cliff(rate):
    exact, _ = fed(cyclic_sets(40_000, 4, 40), 1.0)
    sampled, _ = fed(cyclic_sets(40_000, 4, 40), rate)
    # Consecutive pages are sampled evenly: within a page of the share.
    assert sampled.curve().sizes == pytest.approx(exact.curve().sizes,
                                                  abs=1 / rate)
    np.testing.assert_array_equal(sampled.curve().miss_ratios,
                                  exact.curve().miss_ratios)


def test_uniform_references_touch_their_footprint_every_interval():
    rng = np.random.default_rng(0)
    sets = stream_sets(rng.integers(0, 2000, 30 * 40_000), 40_000)
    sampled, per_interval = fed(sets, 1.0)
    assert per_interval == pytest.approx(2000 * PAGE, rel=0.001)
    curve = sampled.curve()
    # Every page comes back the next interval: no fault at WSS(1).
    assert curve.at(2000) == 0.0
    assert curve.at(curve.sizes[0] - 1) == 1.0


@pytest.mark.parametrize('rate, wss_error, curve_error', [
    (0.01, 0.12, 0.05), (0.1, 0.05, 0.015)])
def test_hashed_sampling_of_zipf_is_close_to_rate_one(rate, wss_error,
                                                      curve_error):
    rng = np.random.default_rng(1)
    pages = workloads.zipf_pages(40 * 20_000, 20_000, 1.0, rng)
    sets = stream_sets(pages, 20_000)
    exact, truth = fed(sets, 1.0)
    sampled, estimates = fed(sets, rate)
    assert np.mean(np.abs(estimates - truth) / truth) < wss_error
    assert sampling.curve_error(sampled.curve(), exact.curve()) < (
        curve_error)
    # A skewed curve: the hot pages fit in a small memory.
    assert exact.curve().at(exact.curve().sizes[0]) < 0.6
    assert sampled.touches_per_s() == pytest.approx(
        exact.touches_per_s(), rel=wss_error)


def test_a_phase_change_shows_in_the_window_then_leaves_it():
    first = [(np.arange(1000), ())] * 10
    second = [(np.arange(50_000, 52_000), ())] * 10
    sampled = accesses(1.0, window_intervals=2, curve_intervals=4)
    for touched, written in first + second[:1]:
        sampled.add_interval(touched, written)
    assert sampled.wss_bytes() == 2000 * PAGE
    assert sampled.window_wss_bytes() == 3000 * PAGE
    # The new phase's first touches are all cold: they miss everywhere.
    assert sampled.curve().at(10 ** 6) == pytest.approx(2000 / 5000)
    for touched, written in second[1:]:
        sampled.add_interval(touched, written)
    assert sampled.window_wss_bytes() == 2000 * PAGE


def test_written_pages_over_the_window():
    sampled = accesses(1.0, window_intervals=3)
    for start in (0, 100, 200, 300):
        sampled.add_interval(np.arange(1000), np.arange(start, start + 50))
    assert sampled.written_wss_bytes() == 150 * PAGE
    assert sampled.window_wss_bytes() == 1000 * PAGE


def test_a_full_pass_changes_no_estimate():
    """The pager sees every page on a full pass; the sample is the same."""
    rng = np.random.default_rng(2)
    sets = stream_sets(rng.integers(0, 5000, 20 * 5000), 5000)
    plain, full = accesses(0.1), accesses(0.1)
    for index, (touched, written) in enumerate(sets):
        plain.add_interval(plain.sample(touched), plain.sample(written))
        full.add_interval(touched, written, full=index % 4 == 3)
        assert plain.wss_bytes() == full.wss_bytes()
    assert sampling.curve_error(plain.curve(), full.curve()) == 0.0


def test_nothing_touched_is_an_empty_working_set_and_no_curve():
    sampled = accesses(0.01)
    assert sampled.wss_bytes() is None and sampled.curve() is None
    assert sampled.touches_per_s() is None
    for _ in range(3):
        sampled.add_interval(np.empty(0, np.int64), [], False, 2.0)
    assert (sampled.wss_bytes(), sampled.window_wss_bytes(),
            sampled.written_wss_bytes()) == (0, 0, 0)
    assert sampled.curve() is None
    assert sampled.touches_per_s() == 0.0


def test_idle_intervals_count_in_the_average_working_set():
    sampled = accesses(1.0, curve_intervals=4, max_reuse=2)
    for touched in ([1, 2], [], [1, 2], []):
        sampled.add_interval(touched)
    curve = sampled.curve()
    # Touched in every other interval: 1 page on average in one
    # interval, 2 in two; every reuse after 2 intervals.
    np.testing.assert_array_equal(curve.sizes, [1, 2])
    np.testing.assert_array_equal(curve.miss_ratios, [1.0, 0.5])


def test_a_vm_beyond_2_to_the_24_pages_is_sampled_by_hash():
    pages = 2 ** 24 + 2 ** 20
    sampled = sampling.SampledAccesses(pages, 0.01, interval_s=1.0)
    top = np.arange(pages - 2 ** 18, pages)
    sampled.add_interval(top, top[::2])
    expected = np.count_nonzero(mrc.shards_sample(top, 0.01))
    assert sampled.wss_bytes() == round(expected / 0.01) * PAGE
    assert sampled.wss_bytes() == pytest.approx(2 ** 18 * PAGE, rel=0.01)


def test_repeats_and_order_do_not_matter():
    one, other = accesses(1.0), accesses(1.0)
    one.add_interval([5, 3, 5, 9], [3, 3])
    other.add_interval(np.array([3, 5, 9], np.uint64), [3])
    assert one.wss_bytes() == other.wss_bytes() == 3 * PAGE
    assert one.written_wss_bytes() == PAGE
    np.testing.assert_array_equal(one.accessed(), [3, 5, 9])


@pytest.mark.parametrize('seed', range(4))
def test_curves_are_curves(seed):
    rng = np.random.default_rng(seed)
    sampled = accesses(rng.choice([0.01, 0.1, 1.0]), curve_intervals=6,
                       max_reuse=int(rng.integers(1, 10)))
    for _ in range(30):
        footprint = int(rng.integers(1, 20_000))
        sampled.add_interval(rng.integers(0, footprint, 5000))
        curve = sampled.curve()
        if curve is None:
            continue
        assert np.all(np.diff(curve.sizes) > 0) and curve.sizes[0] >= 1
        assert np.all((curve.miss_ratios >= 0) & (curve.miss_ratios <= 1))
        assert np.all(np.diff(curve.miss_ratios) <= 0)


def test_fault_rate_is_the_ratio_times_the_touches():
    """Touches a second over the curve's window, of the whole VM."""
    sampled = accesses(1.0, curve_intervals=2)
    sampled.add_interval(np.arange(100), [], False, 10.0)
    sampled.add_interval(np.arange(50), [], False, 10.0)
    sampled.add_interval(np.arange(100), [], False, 30.0)
    assert sampled.touches_per_s() == pytest.approx(150 / 40)
    # 50 of the window's 150 touches reused a page after 2 intervals:
    # they fault in a memory of the average 75 pages of one interval.
    curve = sampled.curve()
    assert curve.sizes[0] == 75
    assert curve.at(75) * sampled.touches_per_s() == pytest.approx(50 / 40)


def test_bad_arguments_are_refused():
    for arguments in ((0.0,), (1.5,), (0.1, 0, -1.0), (0.1, 0, 1.0, 0)):
        with pytest.raises(ValueError):
            sampling.SampledAccesses(10, *arguments)


def test_interval_sets_cut_a_trace_by_time():
    trace = traces.Trace.of([1, 2, 1, 7, 3], [False, True, False, False,
                                              True], times=[0, 5, 9, 31, 35])
    sets = sampling.interval_sets(trace, 10)
    assert [(t.tolist(), w.tolist()) for t, w in sets] == [
        ([1, 2], [2]), ([], []), ([], []), ([3, 7], [3])]
    assert sampling.interval_sets(traces.Trace.of([]), 10) == []
    with pytest.raises(ValueError):
        sampling.interval_sets(trace, 10, start_ns=1)


def test_the_interval_curve_and_the_lru_curve_share_a_loop_s_cliff():
    """A loop of 600 pages, 150 references an interval: LRU hits only at
    the footprint, where the interval curve drops to zero too."""
    pages = np.tile(np.arange(600), 20)
    lru = mrc.exact(pages)
    sampled, _ = fed(stream_sets(pages, 150), 1.0)
    curve = sampled.curve()
    assert curve.at(599) == lru.at(599) == 1.0
    assert curve.at(600) == 0.0 and lru.at(600) == pytest.approx(1 / 20)


def test_curve_error_is_the_mean_gap_over_sizes():
    one = mrc.MissRatioCurve(np.array([100]), np.array([0.0]), 1)
    other = mrc.MissRatioCurve(np.array([200]), np.array([0.0]), 1)
    # They differ by 1 between sizes 100 and 200.
    assert sampling.curve_error(one, other, points=201) == pytest.approx(
        0.5, abs=0.01)
    assert sampling.curve_error(one, one) == 0.0


# -- the cold-page feed ----------------------------------------------------

FEED_PAGES = 4000
RATE = 0.1


def feed(**kwargs):
    detector = coldpages.ColdPageDetector(FEED_PAGES, 1.0, **kwargs)
    return sampling.ColdPageFeed(detector, RATE)


def sampled_pages():
    return np.flatnonzero(mrc.sample_mask(FEED_PAGES, RATE))


def test_without_a_full_pass_only_sampled_pages_go_cold():
    cold_feed = feed(expire_ii=3)
    hot = sampled_pages()[:5]
    for now in range(1, 30):
        cold_feed.add_interval(hot, False, now)
    cold = cold_feed.cold()
    # Every idle sampled page, none of the pages nothing has looked at.
    np.testing.assert_array_equal(np.sort(cold), sampled_pages()[5:])
    assert cold_feed.detector.cold().size == FEED_PAGES - 5
    np.testing.assert_array_equal(cold_feed.in_doubt(),
                                  ~mrc.sample_mask(FEED_PAGES,
                                                   RATE).view(bool))


def test_after_a_full_pass_pages_it_did_not_see_go_cold():
    cold_feed = feed(expire_ii=3)
    used = np.arange(100)
    cold_feed.add_interval(used, True, 1)
    for now in (2, 3):
        cold_feed.add_interval([], False, now)
        # Idle since the full pass for less than expire-time-II.
        assert not np.isin(np.setdiff1d(np.arange(FEED_PAGES),
                                        sampled_pages()),
                           cold_feed.cold()).any()
    cold_feed.add_interval([], False, 4)
    cold = cold_feed.cold()
    # All but the pages it saw used outside the sample, which may still
    # be in use; the sampled ones were seen at 1, idle since.
    outside = np.setdiff1d(used, sampled_pages())
    assert cold.size == FEED_PAGES - outside.size
    assert not np.isin(outside, cold).any()
    # No access counted but those seen.
    assert cold_feed.detector.frequency(np.arange(100, 200)).max() == 0


def test_a_page_seen_once_per_full_pass_period_stays_hot():
    """Outside the sample a page in use shows once after each full pass:
    however short the detector's expire time, it never goes cold."""
    cold_feed = feed(expire_ii=2)
    page = np.setdiff1d(np.arange(50), sampled_pages())[0]
    for now in range(1, 61):
        full = now % 12 == 0
        cold_feed.add_interval([page] if full or now == 1 else [], full,
                               now)
        assert page not in cold_feed.cold()


def test_a_page_outside_the_sample_ages_from_the_next_full_pass():
    """Its bit is read by the full pass after its access: only pages
    idle for expire-time-II since then are cold."""
    cold_feed = feed(expire_ii=5)
    page = np.setdiff1d(np.arange(50), sampled_pages())[0]
    cold_feed.add_interval([], True, 1)
    cold_feed.add_interval([page], False, 2)
    for now in range(3, 12):
        cold_feed.add_interval([], False, now)
        assert page not in cold_feed.cold()
    cold_feed.add_interval([], True, 12)
    for now in range(13, 17):
        cold_feed.add_interval([], False, now)
        assert page not in cold_feed.cold()
    cold_feed.add_interval([], False, 17)
    assert page in cold_feed.cold()


def test_the_feed_ignores_pages_beyond_the_detector():
    cold_feed = feed()
    page = sampled_pages()[0]
    cold_feed.add_interval([FEED_PAGES + 5, page], False, 1)
    assert cold_feed.detector.frequency([page])[0] == 1


def zipf_sets(seed, per_interval=20_000, footprint=20_000, count=40):
    rng = np.random.default_rng(seed)
    pages = workloads.zipf_pages(count * per_interval, footprint, 1.0, rng)
    # Scattered frames, as a guest's are: the lattice hash then draws
    # them about binomially.
    scatter = rng.permutation(1 << 22)[:footprint]
    return stream_sets(scatter[pages], per_interval)


def test_the_working_set_bounds_hold_the_truth_at_their_confidence():
    covered = []
    for salt in range(1, 41):
        sets = zipf_sets(5)
        truth = sets[-1][0].size * PAGE
        sampled = accesses(0.02, salt=salt)
        for touched, written in sets:
            sampled.add_interval(touched, written)
        low, high = sampled.wss_bounds()
        assert low <= sampled.wss_bytes() <= high
        covered.append(low <= truth <= high)
    assert np.mean(covered) >= 0.85


def test_at_rate_one_the_bounds_are_the_estimates():
    sampled, _ = fed(zipf_sets(2, count=30), 1.0)
    assert sampled.wss_bounds() == [sampled.wss_bytes()] * 2
    (low, high), count = sampled.window_bounds()
    assert low == high == sampled.window_wss_bytes() == count * PAGE
    band = sampled.curve_band()
    np.testing.assert_array_equal(band.low.miss_ratios,
                                  band.curve.miss_ratios)
    np.testing.assert_array_equal(band.high.miss_ratios,
                                  band.curve.miss_ratios)


def test_systematic_pages_lower_the_working_sets_low_ends():
    sets = zipf_sets(2, count=30)
    plain, _ = fed(sets, 1.0)
    lowered, _ = fed(sets, 1.0, systematic_pages=25)
    assert lowered.wss_bytes() == plain.wss_bytes()
    assert lowered.wss_bounds() == [plain.wss_bytes() - 25 * PAGE,
                                    plain.wss_bytes()]
    (low, high), _ = lowered.window_bounds()
    assert (low, high) == (lowered.window_wss_bytes() - 25 * PAGE,
                           lowered.window_wss_bytes())
    # The rate is chosen for the sample's own error.
    assert lowered.recent_low_pages() == plain.recent_low_pages()
    with pytest.raises(ValueError):
        accesses(0.5, systematic_pages=-1)


def test_the_curve_band_holds_the_exact_curve():
    sets = zipf_sets(9, count=30)
    exact, _ = fed(sets, 1.0)
    truth = exact.curve()
    inside = []
    for salt in range(1, 21):
        sampled = accesses(0.02, salt=salt)
        for touched, written in sets:
            sampled.add_interval(touched, written)
        band = sampled.curve_band()
        np.testing.assert_array_equal(band.low.sizes, band.curve.sizes)
        assert np.all(band.low.miss_ratios <= band.curve.miss_ratios)
        assert np.all(band.curve.miss_ratios <= band.high.miss_ratios)
        sizes = band.curve.sizes
        inside.append(np.mean((band.low.at(sizes) <= truth.at(sizes))
                              & (truth.at(sizes) <= band.high.at(sizes))))
        assert band.sampled_events < truth.references
    assert np.mean(inside) >= 0.9


def test_a_rate_change_keeps_the_window_at_its_lowest_rate():
    sets = zipf_sets(4, count=20)
    sampled = accesses(0.5, window_intervals=4)
    for index, (touched, written) in enumerate(sets):
        sampled.add_interval(touched, written,
                             rate=0.5 if index < 18 else 0.25)
    assert sampled.rate == 0.25
    union = np.unique(np.concatenate([t for t, _ in sets[-4:]]))
    expected = sampled.sample(union, 0.25).size / 0.25 * PAGE
    assert sampled.window_wss_bytes() == pytest.approx(expected, abs=PAGE)
    # The last interval counts at its own rate, the curve at the lowest.
    assert sampled.wss_bytes() == pytest.approx(
        sampled.sample(sets[-1][0], 0.25).size / 0.25 * PAGE, abs=PAGE)
    assert sampled.curve() is not None


def test_a_new_salt_starts_the_window_and_curve_afresh():
    first = [(np.arange(1000), ())] * 6
    second = [(np.arange(50_000, 51_000), ())] * 2
    sampled = accesses(1.0, window_intervals=4)
    for touched, written in first:
        sampled.add_interval(touched, written)
    for touched, written in second:
        sampled.add_interval(touched, written, salt=99)
    # Only the new salt's two intervals: their pages, each reused once.
    assert sampled.window_wss_bytes() == 1000 * PAGE
    curve = sampled.curve()
    assert curve.references == 2000
    assert curve.at(curve.sizes[-1]) == pytest.approx(0.5)
