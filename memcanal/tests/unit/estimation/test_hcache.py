"""The hypervisor cache's policy (Lu and Shen section 3.1, 3.2), one rule
per test, driven through the same calls a guest makes."""

import numpy as np
import pytest

from memcanal.estimation import _lru
from memcanal.estimation import hcache
from memcanal.estimation import mrc


@pytest.fixture
def storage():
    return hcache.Storage()


def cache_of(storage, capacity=4, **options):
    return hcache.HypervisorCache(storage, capacity,
                                  ghost=hcache.GhostEvents(), **options)


def test_unwritten_block_reads_its_initial_signature(storage):
    assert storage.read(7) == hcache.initial_signature(7)
    assert hcache.initial_signature(7) != hcache.initial_signature(8)
    storage.write(7, 42)
    assert (storage.read(7), storage.reads, storage.writes) == (42, 2, 1)


def test_read_miss_reads_storage_and_caches_nothing(storage):
    cache = cache_of(storage)
    assert cache.read(page=1, block=10) == hcache.initial_signature(10)
    assert (storage.reads, len(cache.queue), cache.read_misses) == (1, 0, 1)


def test_eviction_enters_at_tail_and_read_hit_takes_it_out(storage):
    cache = cache_of(storage)
    cache.read(1, 10)
    cache.evict(1, hcache.initial_signature(10))
    assert cache.queue.lookup(10) is not None
    assert cache.read(2, 10) == hcache.initial_signature(10)
    assert (storage.reads, cache.read_hits, len(cache.queue)) == (1, 1, 0)


def test_full_cache_discards_in_eviction_order(storage):
    cache = cache_of(storage, capacity=2)
    for page, block in ((1, 10), (2, 11), (3, 12)):
        cache.read(page, block)
        cache.evict(page, block)
    assert cache.queue.lookup(10) is None
    assert cache.queue.lookup(11) is not None
    assert cache.queue.lookup(12) is not None
    assert cache.queue.blocks() == [11, 12]


def test_eviction_hitting_a_cached_copy_moves_it_to_tail(storage):
    cache = cache_of(storage, capacity=2)
    cache.read(1, 10)
    cache.evict(1, 100)
    cache.read(2, 11)
    cache.evict(2, 101)
    cache.read(3, 10)             # not exclusive for a moment: page 3
    cache.queue.insert(10, 100, False)
    cache.evict(3, 999)           # hits the copy: moved, not replaced
    assert cache.queue.lookup(10) == (100, False)
    cache.read(4, 12)
    cache.evict(4, 102)
    assert cache.queue.lookup(11) is None   # 11 was the head


def test_release_deletes_the_mapping_and_admits_nothing(storage):
    cache = cache_of(storage)
    cache.read(1, 10)
    cache.release(1)
    cache.evict(1, 5)
    assert (len(cache.queue), cache.rejected) == (0, 1)


def test_admission_needs_p2s_and_s2p_to_agree(storage):
    cache = cache_of(storage)
    cache.read(1, 10)
    cache.read(2, 10)             # page 2 did I/O on 10 last
    cache.evict(1, 5)
    assert (cache.admitted, cache.rejected) == (0, 1)
    cache.evict(2, 6)
    assert cache.admitted == 1 and cache.queue.lookup(10) == (6, False)


def test_without_s2p_check_a_stale_mapping_is_admitted(storage):
    cache = cache_of(storage, check_s2p=False)
    cache.read(1, 10)
    cache.read(2, 10)
    cache.evict(1, 5)
    assert cache.queue.lookup(10) == (5, False)


def test_write_through_writes_storage_and_discards_the_copy(storage):
    cache = cache_of(storage, write_policy='through')
    cache.read(1, 10)
    cache.evict(1, hcache.initial_signature(10))
    cache.write(2, 10, 77)
    assert storage.writes == 1 and storage.read(10) == 77
    assert cache.queue.lookup(10) is None


def test_delayed_write_buffers_dirty_and_writes_back_at_the_head(storage):
    cache = cache_of(storage, capacity=2)
    cache.write(1, 10, 70)
    cache.write(2, 10, 71)        # drops the older copy, unwritten
    assert (storage.writes, cache.queue.lookup(10)) == (0, (71, True))
    cache.evict(2, 71)
    assert len(cache.queue) == 1
    for page, block in ((3, 11), (4, 12)):
        cache.read(page, block)
        cache.evict(page, block)
    assert storage.writes == 1 and storage.read(10) == 71


def test_a_dirty_read_hit_is_written_when_the_page_leaves_the_cache(
        storage):
    cache = cache_of(storage, capacity=1)
    cache.write(1, 10, 70)
    cache.evict(1, 70)
    assert cache.read(2, 10) == 70  # page 2 now holds the only copy
    cache.evict(2, 70)
    assert cache.queue.lookup(10) == (70, True)
    cache.read(3, 11)
    cache.evict(3, 0)
    assert storage.writes == 1 and storage.read(10) == 70


def test_flush_writes_dirty_units_and_owed_pages(storage):
    cache = cache_of(storage, capacity=2)
    cache.write(1, 10, 70)
    cache.evict(1, 70)
    cache.read(2, 10)             # owed by page 2
    cache.write(3, 11, 80)
    cache.flush({2: 70}.__getitem__)
    assert storage.writes == 2
    assert (storage.read(10), storage.read(11)) == (70, 80)
    assert cache.queue.lookup(11) == (80, False)


def test_zero_capacity_writes_dirty_data_through(storage):
    cache = cache_of(storage, capacity=0)
    cache.write(1, 10, 70)
    cache.evict(1, 70)
    assert storage.writes == 1 and len(cache.queue) == 0


def test_bad_options_are_refused(storage):
    with pytest.raises(ValueError):
        hcache.HypervisorCache(storage, 4, write_policy='back')
    with pytest.raises(ValueError):
        hcache.HypervisorCache(storage, -1)


def test_ghost_events_record_admitted_evictions_and_reads(storage):
    cache = cache_of(storage)
    cache.read(1, 10)
    cache.evict(1, 0)
    cache.evict(9, 0)             # no mapping: not in the hypervisor's list
    cache.read(2, 10)
    blocks, reads = cache.ghost.arrays()
    assert blocks.tolist() == [10, 10, 10]
    assert reads.tolist() == [True, False, True]


def brute_ghost(blocks, reads):
    listed, out = [], []
    for block, read in zip(blocks, reads):
        if not read:
            if block in listed:
                listed.remove(block)
            listed.insert(0, block)
            out.append(-1)
        elif block in listed:
            out.append(listed.index(block) + 1)
            listed.remove(block)
        else:
            out.append(0)
    return out


def test_ghost_positions_match_a_list_model():
    rng = np.random.default_rng(3)
    # Enough events that the slot window compacts several times.
    blocks = rng.integers(0, 60, 5000).astype(np.int64)
    reads = rng.random(5000) < 0.5
    positions = np.empty(5000, np.int64)
    _lru.ghost_positions(blocks, reads.view(np.uint8), 60, positions)
    assert positions.tolist() == brute_ghost(blocks.tolist(), reads.tolist())


def test_ghost_positions_refuse_mismatched_reads():
    blocks = np.arange(4, dtype=np.int64)
    with pytest.raises(ValueError):
        _lru.ghost_positions(blocks, np.zeros(3, np.uint8), 4,
                             np.empty(4, np.int64))
    with pytest.raises(ValueError):
        _lru.ghost_positions(blocks, np.zeros(4, np.uint8), 2,
                             np.empty(4, np.int64))


def test_ghost_curve_adds_the_direct_memory_to_each_place():
    # Evict 1, 2, 3 (list: 3 2 1); read 1 (place 3), 3 (place 1), 9 (cold).
    blocks = np.array([1, 2, 3, 1, 3, 9])
    reads = np.array([0, 0, 0, 1, 1, 1], bool)
    curve = mrc.ghost_curve(blocks, reads, direct_pages=100, references=10)
    assert curve.sizes.tolist() == [100, 101, 103]
    # 3 of 10 miss direct memory; one more hits at 101, one more at 103.
    assert curve.miss_ratios.tolist() == pytest.approx([0.3, 0.2, 0.1])
    assert curve.at([99, 102, 1000]).tolist() == pytest.approx(
        [1.0, 0.2, 0.1])


def test_ghost_curve_counts_only_after_the_warm_up():
    blocks = np.array([1, 1, 2, 2])
    reads = np.array([0, 1, 0, 1], bool)
    curve = mrc.ghost_curve(blocks, reads, 10, references=4, count_from=2)
    assert curve.miss_ratios.tolist() == pytest.approx([0.25, 0.0])
    with pytest.raises(ValueError):
        mrc.ghost_curve(blocks, reads, 10, references=1)
