import numpy as np
import pytest

from memcanal.estimation import coldpages
from memcanal.estimation.coldpages import OUT


def detector(pages=64, **kwargs):
    kwargs.setdefault('zone_pages', 4)
    kwargs.setdefault('prefetch_zones', 1)
    kwargs.setdefault('prefetch_count', 100)
    return coldpages.ColdPageDetector(pages, 1.0, **kwargs)


def test_defaults_follow_the_paper_where_it_speaks():
    d = coldpages.ColdPageDetector(10, 2.0)
    assert d.expire_i == 20.0          # 10 x the scan period
    assert d.expire_ii == 40.0         # our choice: 20 periods
    assert d.queues == 8               # MQ's m


def test_page_accessed_every_period_never_goes_cold():
    d = detector(expire_ii=3)
    for t in range(1, 200):
        d.observe([5], t)
        assert 5 not in d.cold()
        assert d.queue_of([5])[0] >= 0
    assert d.queue_of([5])[0] == 7     # the top queue


def test_never_accessed_pages_go_out_after_expire_ii():
    d = detector(pages=8, expire_ii=5)
    d.observe([], 4)
    assert d.cold().size == 0
    d.observe([], 5)
    np.testing.assert_array_equal(d.cold(), np.arange(8))


def test_page_idle_past_expire_ii_goes_out():
    d = detector(expire_ii=5)
    d.observe([3], 10)
    for t in range(11, 15):
        d.observe([0], t)
        assert d.queue_of([3])[0] == 0
    d.observe([0], 15)
    assert d.queue_of([3])[0] == OUT
    assert 3 in d.cold()


def test_frequency_raises_the_queue_as_mq_log2():
    d = detector(queues=4)
    expected = {1: 0, 2: 1, 3: 1, 4: 2, 7: 2, 8: 3, 20: 3}
    for t in range(1, 21):
        d.observe([1], t)
        if t in expected:
            assert d.queue_of([1])[0] == expected[t], t
    assert d.frequency([1])[0] == 20


def test_repeats_in_one_period_count_once():
    d = detector()
    d.observe([2, 2, 2, 2, 2], 1)
    assert d.frequency([2])[0] == 1
    assert d.queue_of([2])[0] == 0


def test_expire_i_drops_one_queue_at_a_time_then_expire_ii_goes_out():
    d = detector(expire_i=10, expire_ii=20)
    for t in range(1, 5):
        d.observe([9], t)              # frequency 4: Q2, last access at 4
    assert d.queue_of([9])[0] == 2
    timeline = {13: 2, 14: 1, 23: 1, 24: 0, 43: 0, 44: OUT}
    for t in range(5, 45):
        d.observe([], t)
        if t in timeline:
            assert d.queue_of([9])[0] == timeline[t], t


def test_an_access_after_demotion_counts_on_from_the_frequency():
    d = detector(expire_i=2, expire_ii=2)
    for t in range(1, 5):
        d.observe([9], t)
    d.observe([], 100)
    assert d.queue_of([9])[0] == OUT
    d.observe([9], 101)                # MQ's history: f = 4 + 1
    assert d.queue_of([9])[0] == 2


def test_one_late_observation_equals_observing_every_period():
    rng = np.random.default_rng(7)
    stepped = detector(pages=256, expire_i=3, expire_ii=5)
    jumped = detector(pages=256, expire_i=3, expire_ii=5)
    for t in range(1, 40):
        accessed = rng.choice(256, size=rng.integers(0, 40))
        stepped.observe(accessed, t)
        jumped.observe(accessed, t)
    for t in range(40, 80):
        stepped.observe([], t)
    jumped.observe([], 79)
    np.testing.assert_array_equal(stepped.queue_of(np.arange(256)),
                                  jumped.queue_of(np.arange(256)))
    np.testing.assert_array_equal(stepped.cold(), jumped.cold())
    assert stepped.cold().size > 0


def test_cold_lists_the_oldest_in_the_out_queue_first():
    d = detector(pages=16, expire_ii=5)
    d.observe(np.arange(16), 0)
    d.observe([1, 2, 3, 4, 5, 6, 7, 8, 9], 2)
    d.observe([8, 9], 4)
    d.observe([], 20)
    cold = d.cold()
    # Out at 5 (pages 0, 10-15), at 7 (1-7), at 9 (8, 9): ties by page.
    np.testing.assert_array_equal(
        cold, [0, 10, 11, 12, 13, 14, 15, 1, 2, 3, 4, 5, 6, 7, 8, 9])
    np.testing.assert_array_equal(d.cold(limit=3), [0, 10, 11])


def test_swapped_pages_are_no_longer_candidates():
    d = detector(pages=8, expire_ii=1)
    d.observe([], 1)
    d.swapped_out([0, 1, 2])
    np.testing.assert_array_equal(d.cold(), [3, 4, 5, 6, 7])
    assert d.stats()['remote'] == 3
    assert d.stats()['out'] == 8


def test_a_faulted_page_leaves_the_out_queue():
    d = detector(pages=32, expire_ii=2)
    d.observe([], 2)
    d.swapped_out(d.cold())
    d.fault(17, 3)
    assert d.queue_of([17])[0] == 0
    assert d.frequency([17])[0] == 1
    assert 17 not in d.cold()
    assert d.stats()['remote'] < 32
    # It was accessed: it needs expire-time-II of idleness to go out again.
    d.observe([], 4)
    assert d.queue_of([17])[0] == 0
    d.observe([], 5)
    assert d.queue_of([17])[0] == OUT


def test_prefetch_zone_bounds():
    d = detector(pages=64, zone_pages=4, prefetch_zones=1,
                 prefetch_count=100, expire_ii=1)
    d.observe([], 1)
    remote = np.arange(0, 64, 2)       # even pages go remote
    d.swapped_out(remote)
    zone = d.fault(22, 2)              # zone 5; range zones 4..6
    assert 22 not in zone
    assert set(zone) == {16, 18, 20, 24, 26}
    assert zone.min() >= 16 and zone.max() < 28
    # Fetched: resident again, in Q0, not accessed.
    assert not np.isin(zone, d.cold()).any()
    np.testing.assert_array_equal(d.queue_of(zone), 0)
    np.testing.assert_array_equal(d.frequency(zone), 0)
    # Nothing left remote in that range: the next fault brings nothing.
    d.swapped_out([21])
    np.testing.assert_array_equal(d.fault(21, 3), [])


def test_prefetch_count_limits_and_faulting_zone_comes_first():
    d = detector(pages=64, zone_pages=4, prefetch_zones=2,
                 prefetch_count=3, expire_ii=1)
    d.observe([], 1)
    d.swapped_out(np.arange(64))
    zone = d.fault(33, 2)              # zone 8 first: its other pages
    np.testing.assert_array_equal(zone, [32, 34, 35])


def test_prefetch_walks_zones_most_recently_accessed_first():
    d = detector(pages=64, zone_pages=4, expire_ii=100)
    d.observe([40], 1)                 # zone 10
    d.observe([9], 2)                  # zone 2, now the head
    d.swapped_out([8, 10, 41, 43, 60])
    np.testing.assert_array_equal(d.prefetch(10), [8, 10, 41, 43, 60])
    np.testing.assert_array_equal(d.prefetch(3), [8, 10, 41])
    np.testing.assert_array_equal(d.prefetch(10, 40, 62), [41, 43, 60])
    np.testing.assert_array_equal(d.prefetch(10, 42, 61), [43, 60])
    d.observe([62], 3)
    np.testing.assert_array_equal(d.prefetch(10), [60, 8, 10, 41, 43])
    # A query: nothing changed.
    assert d.stats()['remote'] == 5


def test_an_observed_access_to_a_remote_page_makes_it_resident():
    d = detector(pages=8, expire_ii=1)
    d.observe([], 1)
    d.swapped_out([4])
    d.observe([4], 2)
    assert d.stats()['remote'] == 0
    assert d.queue_of([4])[0] == 0


def test_rejects_bad_input():
    with pytest.raises(ValueError):
        coldpages.ColdPageDetector(0, 1.0)
    with pytest.raises(ValueError):
        coldpages.ColdPageDetector(8, 0)
    with pytest.raises(ValueError):
        coldpages.ColdPageDetector(8, 1.0, queues=17)
    with pytest.raises(ValueError):
        coldpages.ColdPageDetector(8, 1.0, expire_ii=0)
    d = detector(pages=8)
    with pytest.raises(ValueError):
        d.observe([8], 1)
    with pytest.raises(ValueError):
        d.observe([-1], 1)
    d.observe([1], 5)
    with pytest.raises(ValueError):
        d.observe([1], 4)
    with pytest.raises(ValueError):
        d.fault(9)


def test_pages_not_a_multiple_of_the_zone():
    d = detector(pages=10, zone_pages=4, prefetch_zones=1, expire_ii=1)
    d.observe([], 1)
    d.swapped_out(np.arange(10))
    # Zone 2 (pages 8, 9: no 10, 11) first, then zone 1.
    np.testing.assert_array_equal(d.fault(9, 2), [8, 4, 5, 6, 7])
