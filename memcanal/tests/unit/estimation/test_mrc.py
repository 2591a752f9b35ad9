import collections

import numpy as np
import pytest

from memcanal.estimation import mrc


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


def test_stack_distances_by_hand():
    # a b c a b b d a
    refs = np.array([1, 2, 3, 1, 2, 2, 4, 1])
    cold = mrc.COLD
    assert mrc.stack_distances(refs).tolist() == [
        cold, cold, cold, 3, 3, 1, cold, 3]


@pytest.mark.parametrize('seed', [0, 1, 2])
def test_curve_matches_brute_force_lru_at_every_size(seed):
    rng = np.random.default_rng(seed)
    refs = np.concatenate([rng.integers(0, 40, 600),
                           rng.zipf(1.3, 600) % 97])
    sizes, ratios = mrc.miss_ratio_curve(refs)
    assert sizes[-1] == np.unique(refs).size
    for capacity in (1, 2, 5, 17, 40, sizes[-1]):
        expected = lru_misses(refs.tolist(), capacity) / refs.size
        assert ratios[capacity - 1] == pytest.approx(expected)


def test_curve_only_has_cold_misses_when_everything_fits():
    refs = np.array([5, 6, 5, 6, 7, 5])
    sizes, ratios = mrc.miss_ratio_curve(refs)
    assert ratios[-1] == pytest.approx(3 / 6)
    assert np.all(np.diff(ratios) <= 0)


def test_empty_stream_gives_empty_curve():
    sizes, ratios = mrc.miss_ratio_curve(np.array([], dtype=np.int64))
    assert sizes.size == 0 and ratios.size == 0


def test_compact_keeps_ends_in_bytes_and_bounds_points():
    sizes = np.arange(1, 10001)
    ratios = np.linspace(1, 0, 10000)
    points = mrc.compact(sizes, ratios, 256, 4096)
    assert len(points) <= 256
    assert points[0] == [4096, 1.0]
    assert points[-1] == [10000 * 4096, 0.0]
    assert all(b[0] > a[0] for a, b in zip(points, points[1:]))


def test_compact_keeps_short_curves_whole():
    points = mrc.compact(np.array([1, 2, 3]), np.array([0.5, 0.25, 0.0]),
                         256, 4096)
    assert points == [[4096, 0.5], [8192, 0.25], [12288, 0.0]]
