import collections

import numpy as np
import pytest

from memcanal.estimation import _lru
from memcanal.estimation import mrc
from memcanal.estimation import workloads


def lru_misses(references, capacity):
    """Brute-force LRU cache of ``capacity`` pages; returns the miss count."""
    cache = collections.OrderedDict()
    misses = 0
    for page in references:
        if page in cache:
            cache.move_to_end(page)
        else:
            misses += 1
            cache[page] = True
            if len(cache) > capacity:
                cache.popitem(last=False)
    return misses


def brute_stack_distances(references):
    stack, out = [], []
    for page in references:
        if page in stack:
            out.append(len(stack) - stack.index(page))
            stack.remove(page)
        else:
            out.append(mrc.FIRST_TOUCH)
        stack.append(page)
    return out


def zipf_trace(count, pages, seed):
    return workloads.zipf_pages(count, pages, 1.0, np.random.default_rng(seed))


def test_stack_distances_by_hand():
    # a b c a b b d a
    refs = np.array([1, 2, 3, 1, 2, 2, 4, 1])
    cold = mrc.FIRST_TOUCH
    assert mrc.stack_distances(refs).tolist() == [
        cold, cold, cold, 3, 3, 1, cold, 3]


def test_stack_distances_survive_window_compaction():
    # 300,000 references over 700 pages wrap the slot window many times.
    refs = np.random.default_rng(3).integers(0, 700, 300_000)
    assert mrc.stack_distances(refs).tolist() == brute_stack_distances(
        refs.tolist())


@pytest.mark.parametrize('seed', [0, 1, 2])
def test_exact_curve_matches_brute_force_lru_at_several_sizes(seed):
    rng = np.random.default_rng(seed)
    refs = np.concatenate([rng.integers(0, 40, 600),
                           rng.zipf(1.3, 600) % 97])
    curve = mrc.exact(refs)
    assert curve.sizes[-1] == np.unique(refs).size
    assert curve.references == refs.size
    for capacity in (1, 2, 5, 17, 40, int(curve.sizes[-1]), 1000):
        expected = lru_misses(refs.tolist(), capacity) / refs.size
        assert curve.at(capacity) == pytest.approx(expected)


def test_curve_only_has_cold_misses_when_everything_fits():
    curve = mrc.exact(np.array([5, 6, 5, 6, 7, 5]))
    assert curve.miss_ratios[-1] == pytest.approx(3 / 6)
    assert np.all(np.diff(curve.miss_ratios) <= 0)
    assert curve.at(0) == 1.0


def test_empty_stream_misses_everything():
    for method in mrc.METHODS.values():
        curve = method(np.array([], dtype=np.int64), *(
            [0.5] if method is mrc.shards_fixed_rate else
            [16] if method is mrc.shards_fixed_size else []))
        assert curve.references == 0
        assert curve.at(10) == 1.0


def test_sparse_page_numbers_are_renumbered_not_indexed():
    big = np.array([2 ** 62, 5, 2 ** 62, 2 ** 40, 5], dtype=np.uint64)
    assert mrc.stack_distances(big).tolist() == [0, 0, 2, 0, 3]
    pages, universe = mrc.dense(big)
    assert universe == 3 and pages.max() == 2


def test_strided_page_columns_are_read_in_place():
    records = np.zeros(6, dtype=[('t', '<u4'), ('page', '<u8')])
    records['page'] = [1, 2, 1, 3, 1, 2]
    assert mrc.stack_distances(records['page']).tolist() == [
        0, 0, 2, 0, 2, 3]


def test_c_loop_rejects_pages_outside_the_universe():
    with pytest.raises(ValueError, match='outside the universe'):
        _lru.stack_distances(np.array([1, 9], dtype=np.int64), 5, None,
                             np.zeros(6, dtype=np.int64))
    with pytest.raises(TypeError):
        _lru.stack_distances(np.array([1], dtype=np.int32), 5, None, None)


@pytest.mark.parametrize('rate', [0.01, 0.05])
def test_shards_fixed_rate_is_within_its_error_bound(rate):
    refs = zipf_trace(400_000, 20_000, seed=4)
    sizes = np.linspace(200, 20_000, 100).astype(int)
    exact = mrc.exact(refs).at(sizes)
    errors = []
    for salt in (1, 2, 3):
        shards = mrc.shards_fixed_rate(refs, rate, salt=salt).at(sizes)
        errors.append(np.abs(shards - exact).mean())
    # SHARDS' paper: mean absolute error about 0.01 or less at 1 %.
    assert max(errors) < 0.02
    assert mrc.shards_fixed_rate(refs, 1.0).at(sizes) == pytest.approx(exact)


def test_shards_adjustment_removes_hot_page_bias():
    refs = zipf_trace(400_000, 20_000, seed=5)
    sizes = np.linspace(200, 20_000, 100).astype(int)
    exact = mrc.exact(refs).at(sizes)

    def error(**kwargs):
        return np.mean([np.abs(mrc.shards_fixed_rate(
            refs, 0.005, salt=salt, **kwargs).at(sizes) - exact).mean()
            for salt in range(1, 7)])
    assert error() < error(adjust=False)


def test_shards_fixed_size_tracks_at_most_max_pages_and_is_close():
    refs = zipf_trace(400_000, 20_000, seed=6)
    sizes = np.linspace(200, 20_000, 100).astype(int)
    exact = mrc.exact(refs).at(sizes)
    curve = mrc.shards_fixed_size(refs, 2048)
    assert np.abs(curve.at(sizes) - exact).mean() < 0.02
    # With room for every page it is the exact curve.
    assert mrc.shards_fixed_size(refs, 20_001).at(sizes) == pytest.approx(
        exact)


def test_shards_fixed_size_keeps_its_sample_bounded():
    refs = np.arange(50_000, dtype=np.int64)
    histogram = np.zeros(50_001)
    sampled, threshold = _lru.shards_fixed_size(refs, 50_000, 100, 7,
                                                histogram)
    # Each distinct page is sampled while under the threshold; the final
    # rate leaves about max_pages of the 50,000.
    assert threshold / mrc.HASH_MODULUS * 50_000 == pytest.approx(100,
                                                                  rel=0.3)
    assert sampled < 50_000


def test_aet_is_close_to_exact_on_random_and_zipf():
    rng = np.random.default_rng(8)
    for refs in (rng.integers(0, 5000, 200_000),
                 zipf_trace(200_000, 5000, seed=9)):
        sizes = np.linspace(50, 5000, 50).astype(int)
        error = np.abs(mrc.aet(refs).at(sizes) - mrc.exact(refs).at(sizes))
        assert error.mean() < 0.02


def test_reuse_times_by_hand():
    # a b a a c b: first, first, 2, 1, first, 4
    histogram = mrc.reuse_time_histogram(np.array([0, 1, 0, 0, 2, 1]))
    assert histogram.tolist() == [3, 1, 1, 0, 1, 0, 0]


def test_compact_keeps_ends_in_bytes_and_bounds_points():
    curve = mrc.MissRatioCurve(np.arange(1, 10001), np.linspace(1, 0, 10000),
                               10000)
    points = curve.compact(256, 4096)
    assert len(points) <= 256
    assert points[0] == [4096, 1.0]
    assert points[-1] == [10000 * 4096, 0.0]
    assert all(b[0] > a[0] for a, b in zip(points, points[1:]))


def test_compact_keeps_short_curves_whole():
    curve = mrc.MissRatioCurve(np.array([1, 2, 3]), np.array([0.5, 0.25, 0]),
                               4)
    assert curve.compact(256, 4096) == [[4096, 0.5], [8192, 0.25],
                                        [12288, 0.0]]


def test_sampling_hash_spreads_over_consecutive_pages_without_bias():
    pages = np.arange(100_000, dtype=np.int64)
    for salt in (0, 7, 2 ** 40 + 3):
        # Dense pages: the count is the rate's share, to a page or two.
        assert abs(len(mrc.shards_sample(pages, 0.01, salt)) - 1000) <= 2
    # Over salts, any one page is sampled at the rate.
    sampled = sum(len(mrc.shards_sample(np.array([12345]), 0.1, salt))
                  for salt in range(0, 4000 * 7919, 7919))
    assert 320 < sampled < 480
