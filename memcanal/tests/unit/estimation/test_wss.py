import numpy as np
import pytest

from memcanal.estimation import traces
from memcanal.estimation import wss


def test_prl_takes_hot_pages_once_stable_over_omega():
    estimator = wss.PrlWss(tau=2, omega_s=60, mu_s=30, epsilon_bytes=100,
                           page_size=4096)
    estimator.handle(np.array([1, 1, 2, 3, 3, 3]))
    # dist: 2, then 2, then 2 == dist two iterations (60 s) back.
    assert estimator.iterate() is None
    assert estimator.iterate() is None
    assert estimator.iterate() == 2 * 4096 + 100
    assert estimator.rounds == 1
    # A new round starts from an empty buffer.
    assert estimator.buffer.pages_logged() == 0


def test_prl_keeps_iterating_while_hot_pages_grow():
    estimator = wss.PrlWss(tau=1, omega_s=30, mu_s=30)
    for page in range(5):
        estimator.handle(np.array([page]))
        assert estimator.iterate() is None
    assert estimator.iterate() == 5 * 4096


def test_prl_no_hot_page_is_not_convergence():
    estimator = wss.PrlWss(tau=50, omega_s=60, mu_s=30)
    for _ in range(6):
        estimator.handle(np.array([1, 2]))
        assert estimator.iterate() is None
    assert estimator.estimate is None


def test_prl_rejects_bad_parameters():
    with pytest.raises(ValueError):
        wss.PrlWss(tau=0)
    with pytest.raises(ValueError):
        wss.PrlWss(mu_s=0)


def test_pml_counts_distinct_dirty_pages_until_none_is_new():
    estimator = wss.PmlWss(page_size=4096)
    estimator.handle(np.array([4, 9]))
    assert estimator.iterate() is None
    estimator.handle(np.array([9]))
    assert estimator.iterate() == 2 * 4096


def test_pml_stops_at_once_when_the_vm_only_reads():
    # The paper's RRWW failure: no dirty page in the first interval.
    estimator = wss.PmlWss()
    assert estimator.iterate() == 0


def _touching(pages, seconds, per_second=1000):
    times = np.arange(seconds * per_second) * (10 ** 9 // per_second)
    return traces.Trace.of(np.resize(pages, len(times)), times=times)


def test_esx_scales_the_touched_fraction_of_its_sample():
    esx = wss.EsxSampling(1000, np.random.default_rng(0), sample_pages=100,
                          period_s=1.0, page_size=4096)
    esx.feed(_touching(np.arange(1000), 3))
    # Every page is touched each period: the whole VM.
    assert esx.history[:2] == [1000 * 4096, 1000 * 4096]
    esx = wss.EsxSampling(1000, np.random.default_rng(0), sample_pages=100,
                          period_s=1.0)
    esx.feed(_touching(np.arange(250), 5))
    assert all(0.1 * 1000 * 4096 < e < 0.4 * 1000 * 4096
               for e in esx.history)


def test_esx_idle_periods_end_with_nothing_touched():
    esx = wss.EsxSampling(100, np.random.default_rng(0), sample_pages=10,
                          period_s=1.0)
    esx.feed(_touching(np.arange(100), 1))
    esx.advance(5 * 10 ** 9)
    assert esx.history[-1] == 0
    assert len(esx.history) == 5


def test_distinct_pages_is_the_window_working_set():
    assert wss.distinct_pages(np.array([3, 3, 9, 1, 9])) == 3
