"""The applications' workloads, at 1/16 of their size."""

import numpy as np
import pytest

from memcanal.estimation import mrc
from memcanal.estimation import workloads

SCALE = 1 / 16
MB_PAGES = 2 ** 20 // 4096


def pages_of(megabytes):
    return int(megabytes * SCALE * MB_PAGES)


def curve(workload, count=300_000, warmup=100_000):
    trace = workload.take(warmup + count)
    return mrc.exact(trace.pages), trace


@pytest.mark.parametrize('cls', [workloads.SpecWebLike,
                                 workloads.IndexSearchLike,
                                 workloads.TpchLike, workloads.TpccLike,
                                 workloads.DacapoLike])
def test_same_seed_same_trace_and_read_only_where_stated(cls):
    first = cls(scale=SCALE, rng=np.random.default_rng(3)).take(20000)
    again = cls(scale=SCALE, rng=np.random.default_rng(3)).take(20000)
    assert np.array_equal(first.pages, again.pages)
    assert first.pages.min() >= 0
    if cls in (workloads.SpecWebLike, workloads.IndexSearchLike,
               workloads.TpchLike):
        assert not first.writes.any()
    else:
        assert 0.2 < first.writes.mean() < 0.4


def test_specweb_mix_and_a_slowly_falling_curve():
    web = workloads.SpecWebLike(scale=SCALE)
    lru, trace = curve(web)
    shares = web.requested_classes / web.requested_classes.sum()
    assert shares == pytest.approx([0.35, 0.5, 0.14, 0.01], abs=0.02)
    assert trace.pages.max() < web.working_set_pages
    at = lru.at([pages_of(256), pages_of(512), pages_of(1024)])
    assert at[0] > at[1] > at[2] > 0.1


def test_index_search_gains_much_up_to_its_hot_set():
    search = workloads.IndexSearchLike(scale=SCALE)
    lru, trace = curve(search, count=600_000, warmup=600_000)
    assert trace.pages.max() < search.working_set_pages
    at_512, at_920 = lru.at([pages_of(512), pages_of(920)])
    assert at_920 < 0.5 * at_512


def test_tpch_misses_only_below_its_hot_set():
    tpch = workloads.TpchLike(scale=SCALE)
    lru, trace = curve(tpch)
    above, below = lru.at([pages_of(340), pages_of(0.8 * 330)])
    assert above < 0.05
    assert below > 5 * above


def test_tpcc_footprint_grows_linearly():
    tpcc = workloads.TpccLike(scale=SCALE, growth_mb_per_s=1.0)
    assert tpcc.footprint_at(0) == pages_of(300)
    assert tpcc.footprint_at(100) - tpcc.footprint_at(0) == pytest.approx(
        pages_of(100), rel=0.01)
    assert tpcc.footprint_at(10_000) == pages_of(900)
    seconds = 100
    trace = tpcc.run_for(seconds)
    assert trace.pages.max() < tpcc.footprint_at(seconds)
    assert trace.pages.max() > tpcc.footprint_at(seconds / 2)


def test_dacapo_follows_its_phases():
    dacapo = workloads.DacapoLike(
        phases=[('small', 10, 5), ('big', 100, 5)], scale=1.0)
    assert dacapo.phase_at(1)[0] == 'small'
    assert dacapo.phase_at(7)[0] == 'big'
    assert dacapo.phase_at(12)[0] == 'small'
    first = dacapo.run_for(5)
    second = dacapo.run_for(10)
    assert first.pages.max() < 10 * MB_PAGES <= second.pages.max()
