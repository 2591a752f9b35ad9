"""The applications' workloads, at 1/8 of their size.

Sizes scale with ``scale``, so each assertion names its sizes at full
scale (the papers' megabytes) and ``pages_of`` scales them. Run as a
script, the module prints the three Hcache VMs' LRU miss ratios at full
scale (about ten seconds), which the tests leave out to stay fast.
"""

import numpy as np
import pytest

from memcanal.estimation import mrc
from memcanal.estimation import workloads

SCALE = 1 / 8
MB_PAGES = 2 ** 20 // 4096
HCACHE_SIZES_MB = (256, 336, 452, 512, 748, 920)
READ_ONLY = (workloads.SpecWebLike, workloads.IndexSearchLike,
             workloads.TpchLike)
ALL = READ_ONLY + (workloads.TpccLike, workloads.DacapoLike)


def pages_of(megabytes, scale=SCALE):
    return int(megabytes * scale * MB_PAGES)


def declared_pages(workload):
    """The pages a workload says it can touch at all."""
    if isinstance(workload, workloads.TpchLike):
        return workload.database_pages
    if isinstance(workload, workloads.TpccLike):
        return workload.max_pages
    if isinstance(workload, workloads.DacapoLike):
        return max(pages for _, pages, _ in workload.phases)
    return workload.working_set_pages


@pytest.mark.parametrize('cls', ALL)
def test_same_seed_same_trace_other_seed_other_trace(cls):
    first = cls(scale=SCALE, rng=np.random.default_rng(3)).take(30000)
    again = cls(scale=SCALE, rng=np.random.default_rng(3)).take(30000)
    other = cls(scale=SCALE, rng=np.random.default_rng(4)).take(30000)
    assert np.array_equal(first.pages, again.pages)
    assert np.array_equal(first.writes, again.writes)
    assert not np.array_equal(first.pages, other.pages)


@pytest.mark.parametrize('cls', ALL)
def test_pages_stay_in_the_declared_data_and_writes_where_stated(cls):
    workload = cls(scale=SCALE)
    trace = workload.take(200_000)
    assert trace.pages.min() >= 0
    assert trace.pages.max() < declared_pages(workload)
    if cls in READ_ONLY:
        assert not trace.writes.any()
    else:
        assert trace.writes.mean() == pytest.approx(0.3, abs=0.02)


def test_scale_multiplies_every_size():
    web = workloads.SpecWebLike(scale=SCALE)
    assert web.working_set_pages == pytest.approx(pages_of(4900), rel=0.01)
    search = workloads.IndexSearchLike(scale=SCALE)
    assert search.mapping_pages == pages_of(66)
    assert search.working_set_pages == pytest.approx(
        pages_of(66 + 2400), rel=0.01)
    tpch = workloads.TpchLike(scale=SCALE)
    assert (tpch.database_pages, tpch.hot_pages) == (pages_of(496),
                                                     pages_of(330))
    tpcc = workloads.TpccLike(scale=SCALE)
    assert (tpcc.start_pages, tpcc.max_pages) == (pages_of(300),
                                                  pages_of(900))


def test_specweb_mix_favours_small_files_and_zipf_within_a_class():
    web = workloads.SpecWebLike(scale=SCALE)
    trace = web.take(600_000)
    shares = web.requested_classes / web.requested_classes.sum()
    assert shares == pytest.approx([0.35, 0.50, 0.14, 0.01], abs=0.01)
    # Class 0 holds one-page files: the first is the Zipf head, asked
    # about as often as the next nine together (1 against H(10) - 1).
    small = trace.pages[trace.pages < web.offsets[1]]
    counts = np.bincount(small, minlength=10)
    assert counts[0] > 5 * counts[9]
    assert counts[0] == pytest.approx(counts[1:10].sum() / 1.93, rel=0.2)


def test_specweb_reads_each_file_whole_and_in_order():
    web = workloads.SpecWebLike(scale=SCALE)
    pages = web.take(200_000).pages
    largest = pages >= web.offsets[3]
    starts = np.flatnonzero(largest & (
        (pages - web.offsets[3]) % web.CLASS_PAGES[3] == 0))
    starts = starts[starts + web.CLASS_PAGES[3] <= pages.size]
    assert starts.size > 10
    for start in starts:
        run = pages[start:start + web.CLASS_PAGES[3]]
        assert (np.diff(run) == 1).all()


def test_specweb_curve_falls_slowly_like_a_web_server():
    web = workloads.SpecWebLike(scale=SCALE)
    lru = mrc.exact(web.take(600_000).pages)
    at = lru.at([pages_of(mb) for mb in (128, 256, 512, 1024)])
    assert (np.diff(at) < 0).all()
    # Moderate at 512 MB, and memory keeps paying off slowly: doubling
    # it neither halves the misses nor leaves them unchanged.
    assert 0.15 < at[2] < 0.6
    assert 0.6 * at[2] < at[3] < 0.95 * at[2]
    assert lru.at([web.working_set_pages // 4])[0] > 0.05


def test_index_search_gains_much_up_to_its_hot_set():
    search = workloads.IndexSearchLike(scale=SCALE)
    trace = search.take(2_000_000)
    at_512, at_748, at_920 = mrc.exact(trace.pages).at(
        [pages_of(512), pages_of(748), pages_of(920)])
    assert at_512 > at_748 > at_920
    assert at_920 < 0.2 * at_512
    # Every binary search starts in the middle of the mapping file: the
    # top of the bisection is the hottest page of all.
    counts = np.bincount(trace.pages)
    assert counts.argmax() == search.mapping_pages // 2


def test_tpch_misses_only_below_its_hot_set():
    tpch = workloads.TpchLike(scale=SCALE)
    pages = tpch.take(600_000).pages
    cold = np.unique(pages).size / pages.size
    above, below = mrc.exact(pages).at([pages_of(340), pages_of(0.8 * 330)])
    assert above - cold < 0.005
    assert below > 0.2
    # The 17 queries' scans together cover the hot tables exactly.
    scanned = np.unique(pages[pages < tpch.hot_pages])
    assert scanned.size == tpch.hot_pages


def test_tpcc_footprint_grows_linearly_in_time():
    # Short rounds: a round's references all see its first footprint.
    tpcc = workloads.TpccLike(scale=SCALE, growth_mb_per_s=1.0,
                              reference_ns=1_000_000,
                              references_per_round=200)
    assert tpcc.footprint_at(0) == pages_of(300)
    assert tpcc.footprint_at(100) - tpcc.footprint_at(0) == pytest.approx(
        pages_of(100), rel=0.01)
    assert tpcc.footprint_at(10_000) == pages_of(900)
    highest, footprints = [], []
    for window in range(1, 11):
        trace = tpcc.run_for(20 * window)  # until, not for, 20 s more
        highest.append(trace.pages.max())
        footprints.append(tpcc.working_set_pages)
        assert trace.pages.max() < tpcc.footprint_at(20 * window + 1)
    seconds = 20 * np.arange(1, 11)
    slope = np.polyfit(seconds, highest, 1)[0]
    assert slope == pytest.approx(pages_of(1.0), rel=0.05)
    assert footprints == pytest.approx(
        [tpcc.footprint_at(s) for s in seconds], rel=0.01)
    # Most references go to the newest tenth, where new orders land:
    # 70 %, plus the uniform 30 %'s tenth.
    footprint = np.array([tpcc.footprint_at(time / 1e9)
                          for time in trace.times[::10]])
    newest = trace.pages[::10] >= 0.9 * footprint
    assert newest.mean() == pytest.approx(0.73, abs=0.02)


def test_dacapo_follows_its_phases():
    dacapo = workloads.DacapoLike(
        phases=[('small', 10, 5), ('big', 100, 5)], scale=1.0)
    assert dacapo.phase_at(1)[0] == 'small'
    assert dacapo.phase_at(7)[0] == 'big'
    assert dacapo.phase_at(12)[0] == 'small'
    first = dacapo.run_for(5)
    second = dacapo.run_for(10)
    assert first.pages.max() < 10 * MB_PAGES <= second.pages.max()


def test_dacapo_default_run_changes_working_set_at_each_program():
    dacapo = workloads.DacapoLike(scale=SCALE, reference_ns=10_000_000,
                                  references_per_round=256)
    names = [name for name, _, _ in dacapo.phases]
    sizes = {name: pages for name, pages, _ in dacapo.phases}
    assert sum(seconds for _, _, seconds in dacapo.phases) == 40 * 60
    assert sorted(sizes, key=sizes.get)[-2:] == ['eclipse', 'h2']
    start = 0
    for name, pages, seconds in dacapo.phases:
        # Skip a window at each edge: a round may straddle the change.
        dacapo.run_for(start + 5)
        trace = dacapo.run_for(start + seconds - 5)
        assert dacapo.phase_at(start + seconds / 2)[0] == name
        assert 0.95 * pages < trace.pages.max() < pages
        assert dacapo.working_set_pages == pages
        dacapo.run_for(start + seconds)
        start += seconds
    assert len(set(names)) == len(names) == 10


def hcache_table(references=3_000_000, scale=1.0):
    """The three Hcache VMs' LRU miss ratios at Table 2's sizes.

    Two rows each: over the whole trace (cold misses count, as
    ``mrc.exact`` gives), and over its last two thirds (the first third
    warms the memory, as benchmarks/policies.py measures).
    """
    sizes = [pages_of(mb, scale) for mb in HCACHE_SIZES_MB]
    lines = ['%-16s %-6s' % ('MB', '') + ''.join(
        '%7d' % mb for mb in HCACHE_SIZES_MB)]
    for cls in READ_ONLY:
        pages = cls(scale=scale).take(references).pages
        whole = mrc.exact(pages).at(sizes)
        distances = mrc.stack_distances(pages)[references // 3:]
        warm = np.array([np.mean((distances == mrc.FIRST_TOUCH)
                                 | (distances > size)) for size in sizes])
        for label, ratios in (('whole', whole), ('warm', warm)):
            lines.append('%-16s %-6s' % (cls.__name__, label) + ''.join(
                '%7.3f' % ratio for ratio in ratios))
            lines.append('%-16s %-6s' % ('', '/512') + ''.join(
                '%7.2f' % (ratio / ratios[3]) for ratio in ratios))
    return '\n'.join(lines)


if __name__ == '__main__':
    print(hcache_table())
