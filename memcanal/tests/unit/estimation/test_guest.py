"""The guest page cache: perfect LRU, its I/O and notices, its checks."""

import pytest

from memcanal.estimation import guest
from memcanal.estimation import hcache


class RecordingIo(hcache.DirectIo):
    """Storage I/O that also records the calls the guest made."""

    def __init__(self):
        super().__init__(hcache.Storage())
        self.calls = []

    def read(self, page, block):
        self.calls.append(('read', block))
        return super().read(page, block)

    def write(self, page, block, signature):
        self.calls.append(('write', block))
        super().write(page, block, signature)

    def evict(self, page, signature):
        self.calls.append(('evict', page))

    def release(self, page):
        self.calls.append(('release', page))


def test_lru_hits_and_misses():
    vm = guest.GuestPageCache(2, RecordingIo())
    hits = [vm.access(block, False) for block in (1, 2, 1, 3, 2, 1)]
    # 3 evicts 2 (1 was used more recently); 2 then evicts 1.
    assert hits == [False, False, True, False, False, False]
    assert (vm.accesses, vm.misses) == (6, 5)


def test_clock_gives_referenced_pages_a_second_chance():
    blocks = (1, 2, 2, 1, 3, 2)
    vm = guest.GuestPageCache(2, RecordingIo(), replacement='clock')
    # Every page is referenced when 3 comes: the hand clears them all
    # and takes 1, where LRU takes 2, the least recently used.
    assert [vm.access(block, False) for block in blocks] == [
        False, False, True, True, False, True]
    lru = guest.GuestPageCache(2, RecordingIo())
    assert [lru.access(block, False) for block in blocks] == [
        False, False, True, True, False, False]


def test_a_miss_reads_before_it_evicts():
    io = RecordingIo()
    vm = guest.GuestPageCache(1, io)
    vm.access(1, False)
    vm.access(2, False)
    assert [call[0] for call in io.calls] == ['read', 'read', 'evict']


def test_writes_fill_first_and_are_written_back_at_eviction():
    io = RecordingIo()
    vm = guest.GuestPageCache(1, io)
    vm.access(1, True)
    vm.access(1, True)
    vm.access(2, False)
    assert io.calls[:3] == [('read', 1), ('read', 2), ('write', 1)]
    assert io.calls[3][0] == 'evict'
    assert io.storage.writes == 1


def test_reads_see_what_was_written():
    storage = hcache.Storage()
    vm = guest.GuestPageCache(1, hcache.DirectIo(storage))
    vm.run([1, 2, 1, 2], [True, False, False, False])
    assert vm.corrupted == 0


class ForgetfulIo(hcache.DirectIo):
    """Loses writes: what a broken cache would look like to the guest."""

    def write(self, page, block, signature):
        pass


def test_a_read_of_wrong_content_is_counted():
    vm = guest.GuestPageCache(1, ForgetfulIo(hcache.Storage()))
    vm.run([1, 2, 1], [True, False, False])
    assert vm.corrupted == 1
    assert vm.first_corruption == (1, 3)


def test_sync_writes_dirty_pages_once():
    storage = hcache.Storage()
    vm = guest.GuestPageCache(4, hcache.DirectIo(storage))
    vm.run([1, 2, 3], [True, True, False])
    vm.sync()
    vm.sync()
    assert storage.writes == 2


def test_recycling_releases_the_old_page():
    io = RecordingIo()
    vm = guest.GuestPageCache(4, io, recycle_ratio=1.0)
    vm.run([1, 1], [False, True])
    assert [call[0] for call in io.calls] == ['read', 'release']
    assert vm.corrupted == 0


def test_a_leaked_page_is_evicted_later_without_a_release():
    io = RecordingIo()
    vm = guest.GuestPageCache(8, io, recycle_ratio=1.0, leak_recycled=True)
    vm.run([1, 1], [False, True])
    assert io.calls == [('read', 1)]
    leaked_page = 0               # the first page handed out
    vm.run([2, 2, 3, 3], [False, True, False, True])
    assert ('evict', leaked_page) in io.calls
    assert not any(call[0] == 'release' for call in io.calls)


def test_kernel_reuse_shrinks_the_page_cache():
    io = RecordingIo()
    vm = guest.GuestPageCache(4, io, reuse_ratio=1.0)
    vm.run(range(8), [False] * 8)
    assert vm.accesses == 8
    evictions = sum(call[0] == 'evict' for call in io.calls)
    assert evictions > 8 - 4


def test_resize_evicts_the_least_recent_pages_and_grows_back():
    io = RecordingIo()
    vm = guest.GuestPageCache(4, io)
    vm.run([1, 2, 3, 4, 1], [False] * 5)
    vm.resize(2)
    assert [call[0] for call in io.calls[4:]] == ['evict', 'evict']
    assert [vm.access(block, False) for block in (1, 4, 2)] == [
        True, True, False]
    vm.resize(5)
    vm.run([5, 6, 7], [False] * 3)
    assert [vm.access(block, False) for block in (4, 2, 5, 6, 7)] == [
        True] * 5
    with pytest.raises(ValueError):
        vm.resize(0)


def test_all_notices_dropped_reach_nobody():
    io = RecordingIo()
    vm = guest.GuestPageCache(1, io, drop_notices=1.0)
    vm.run([1, 2, 3], [False] * 3)
    assert all(call[0] == 'read' for call in io.calls)


@pytest.mark.parametrize('options', [
    {'recycle_ratio': 1.5}, {'reuse_ratio': -0.1}, {'drop_notices': 2},
    {'replacement': 'fifo'}])
def test_ratios_outside_zero_one_are_refused(options):
    with pytest.raises(ValueError):
        guest.GuestPageCache(4, RecordingIo(), **options)


def test_a_guest_needs_a_page():
    with pytest.raises(ValueError):
        guest.GuestPageCache(0, RecordingIo())
