import numpy as np
import pytest

from memcanal.estimation import workloads
from memcanal.estimation import wss


def test_hot_cold_stays_in_bounds_and_favours_hot_set():
    workload = workloads.HotColdWorkload(10000, 100, 0.9,
                                         np.random.default_rng(0),
                                         hot_start=500)
    refs = workload.references(20000)
    assert refs.min() >= 0 and refs.max() < 10000
    hot = (refs >= 500) & (refs < 600)
    assert 0.88 < hot.mean() < 0.93


def test_hot_cold_is_repeatable_by_seed():
    a = workloads.HotColdWorkload(1000, 10, 0.5, np.random.default_rng(7))
    b = workloads.HotColdWorkload(1000, 10, 0.5, np.random.default_rng(7))
    assert np.array_equal(a.references(100), b.references(100))


@pytest.mark.parametrize('kwargs', [
    dict(total_pages=10, hot_pages=0, hot_probability=0.5),
    dict(total_pages=10, hot_pages=11, hot_probability=0.5),
    dict(total_pages=10, hot_pages=5, hot_probability=1.5),
    dict(total_pages=10, hot_pages=5, hot_probability=0.5, hot_start=6),
])
def test_hot_cold_rejects_impossible_shapes(kwargs):
    with pytest.raises(ValueError):
        workloads.HotColdWorkload(rng=np.random.default_rng(0), **kwargs)


def test_loop_continues_across_calls():
    workload = workloads.LoopWorkload(loop_pages=5, start_page=100)
    assert workload.references(3).tolist() == [100, 101, 102]
    assert workload.references(4).tolist() == [103, 104, 100, 101]
    with pytest.raises(ValueError):
        workloads.LoopWorkload(0)


def test_distinct_pages_is_the_window_working_set():
    assert wss.distinct_pages(np.array([3, 3, 9, 1, 9])) == 3
    assert wss.distinct_pages(np.array([], dtype=np.int64)) == 0
