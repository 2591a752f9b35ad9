"""Attacks on the copies of paged memory (issue #25, finding 1), against
the real memcanal-pager, memory server (TLS, lease tokens) and shim on
loopback.

Before #25 a memory server's pages were the guest's plaintext, checked
by a checksum anyone could compute: whoever reached a page read it, and
a page rewritten to keep its checksum was served to the guest. Now every
copy a pager gives away (memory server, file store, pool) is AES-256-GCM
ciphertext bound to its VM, page and version under a key of the VM's; a
copy that does not open is a bad copy, and the next is served.

The VMs are sample_guest under the shim (pagers.Vm, test_pager's
SampledProcess): every word of every page names the page and its
version, and ``check`` counts the wrong ones. The attacker holds what a
compromised lender has: the VM's pages on the server (here a lease token
for the VM's owner, which a stolen token gives too), or the host's files.
The files a pager trusts are attacked in test_pager_file_attacks.py, its
lender in test_pager_lender_attacks.py.
"""

import os
import struct
import time
import uuid

import numpy as np
import pytest

from memcanal.agent import paging
from memcanal.agent.memserver import OK
from memcanal.agent.memserver import PAGE
from memcanal.agent.memserver import REFUSED
from memcanal.tests.functional import pagers
from memcanal.tests.functional import test_pager as pager_tests

pytestmark = pytest.mark.functional

BATCH = 1024              # pages a memory server's GET gives at most

# The pager, the lender and the VMs as pagers.py makes them.
build = pagers.build
lender = pagers.lender
vms = pagers.vms


class LenderCopies:
    """A VM's copies on the memory server, as a compromised lender (or
    the holder of a stolen token of the VM's owner) reaches them."""

    def __init__(self, lender, owner):
        self.owner = owner
        self.client = lender.client(owner, quota_pages=65536)

    def read(self, page, count=1):
        status, data = self.client.get(self.owner, page, count)
        assert status == OK, status
        return data

    def write(self, page, data):
        assert self.client.put(self.owner, page, data) == (OK, 1)

    def read_all(self, pages):
        return b''.join(self.read(first, min(BATCH, pages - first))
                        for first in range(0, pages, BATCH))


class FileCopies:
    """A VM's copies in its file store: page i at i * 4096."""

    def __init__(self, path):
        self.path = path

    def read(self, page):
        with open(self.path, 'rb') as store:
            store.seek(page * PAGE)
            return store.read(PAGE)

    def write(self, page, data):
        with open(self.path, 'r+b') as store:
            store.seek(page * PAGE)
            store.write(data)


class PoolCopies:
    """A VM's copies in the pool file (pool.c's layout: a header page of
    magic, version, capacity, next slot; a 16-byte key per slot, (owner,
    page); the slots' pages), as whoever could write the file would
    forge them."""

    HEADER = struct.Struct('<QQQQ')

    def __init__(self, path, owner):
        self.path, self.owner = path, owner
        self.slots, self.next = {}, None

    def offset(self, page):
        """Where the page's slot is; the keys are read again once pagers
        put pages since."""
        with open(self.path, 'rb') as pool:
            _magic, _version, capacity, next_slot = self.HEADER.unpack(
                pool.read(self.HEADER.size))
            if next_slot != self.next:
                pool.seek(PAGE)
                keys = np.frombuffer(pool.read(capacity * 16),
                                     '<u8').reshape(-1, 2)
                mine = np.flatnonzero(keys[:, 0] == self.owner)
                self.slots = dict(zip(keys[mine, 1].tolist(),
                                      mine.tolist()))
                self.next = next_slot
        return (PAGE + -(-capacity * 16 // PAGE) * PAGE
                + self.slots[page] * PAGE)

    def read(self, page):
        with open(self.path, 'rb') as pool:
            pool.seek(self.offset(page))
            return pool.read(PAGE)

    def write(self, page, data):
        offset = self.offset(page)
        with open(self.path, 'r+b') as pool:
            pool.seek(offset)
            pool.write(data)


def copies_of(target, vm, lender, pool):
    if target == 'lender':
        return LenderCopies(lender, vm.owner)
    if target == 'file':
        return FileCopies(vm.file)
    return PoolCopies(pool, vm.owner)


def pages_of(runs):
    return [page for first, count in zip(runs[::2], runs[1::2])
            for page in range(first, first + count)]


def flipped(data):
    return data[:100] + bytes([data[100] ^ 1]) + data[101:]


GROUP = 40


@pytest.mark.parametrize('target', ['lender', 'file', 'pool'])
def test_forged_replayed_and_foreign_copies_are_refused(
        build, lender, vms, short_tmp_path, target):
    """Where a VM's copies are (the lender, its file store, the pool),
    the attacker puts, each over its own pages: the page's own copy from
    before the guest rewrote it (a replay), its copy with one bit flipped,
    another page's copy, another VM's copy of the same page (the two VMs
    given the same key file), and a page of its own making. Each is
    refused as a bad copy, the next one serves the page, and the guest
    reads back no wrong word."""
    key = pager_tests.key_file(os.path.join(short_tmp_path, 'vm.key'))
    pool = os.path.join(short_tmp_path, 'pool') if target == 'pool' else None
    order = ('file', 'lender') if target == 'file' else ('lender', 'file')
    other = pagers.Vm(build, os.path.join(short_tmp_path, 'b'), lender, key,
                      order, pool, guest_mb=4)
    vms.append(other)
    vm = pagers.Vm(build, os.path.join(short_tmp_path, 'a'), lender, key,
                   order, pool)
    vms.append(vm)
    other.swap_out()
    vm.swap_out()
    copies = copies_of(target, vm, lender, pool)
    foreign_pages = list(range(0, GROUP * 16, 16))
    foreign = {page: copies_of(target, other, lender, pool).read(page)
               for page in foreign_pages}
    captured = range(other.pages, other.pages + 2048)
    old = {page: copies.read(page) for page in captured}

    vm.process.send('touch 1')
    touched = vm.process.answer()
    assert touched['bad'] == 0, touched
    rewritten = set(pages_of(touched['written']))
    assert vm.check() == 0
    vm.swap_out()

    replayed = [page for page in captured if page in rewritten][:GROUP]
    rest = [page for page in range(other.pages, vm.pages, 7)
            if page not in rewritten]
    flip, swap, chosen = (rest[i * GROUP:(i + 1) * GROUP] for i in range(3))
    donors = rest[3 * GROUP:4 * GROUP]
    forged = {}
    forged.update({page: old[page] for page in replayed})
    forged.update({page: flipped(copies.read(page)) for page in flip})
    forged.update({page: copies.read(donor)
                   for page, donor in zip(swap, donors)})
    forged.update(foreign)
    forged.update({page: b'ROOT_PASSWORD=letmein\n'.ljust(PAGE, b'\0')
                   for page in chosen})
    assert len(forged) == 5 * GROUP
    for page, data in forged.items():
        assert data != copies.read(page)
        copies.write(page, data)

    assert vm.check() == 0
    stats = vm.stats()
    assert stats['lost'] == 0, stats
    if target == 'pool':
        assert stats['pool_bad'] == len(forged), stats
        assert stats['bad_sum'] == [0, 0], stats
    else:
        # The first store refused each forgery; the second served it.
        assert stats['bad_sum'] == [len(forged), 0], stats
        assert stats['served'][1] == len(forged), stats
        assert stats['pool_bad'] == 0, stats


def copies_in(path, pages):
    with open(path, 'rb') as store:
        data = store.read()
    return [data[page * PAGE:(page + 1) * PAGE] for page in range(pages)]


def test_no_two_seals_of_a_page_share_a_nonce(build, lender, vms,
                                              short_tmp_path):
    """The same pages, unchanged, sealed again (the next swap-out), and
    sealed by the next QEMU of the same VM (same key file, same owner,
    versions from 1 again): never the same ciphertext twice, which a
    repeated nonce would give (and, the pages differing, the XOR of the
    two plaintexts to whoever holds both copies)."""
    key = pager_tests.key_file(os.path.join(short_tmp_path, 'vm.key'))
    vm = pagers.Vm(build, os.path.join(short_tmp_path, 'a'), lender, key)
    vms.append(vm)
    vm.swap_out()
    first = copies_in(vm.file, vm.pages)
    assert vm.check() == 0
    vm.swap_out()
    again = copies_in(vm.file, vm.pages)
    vm.process.stop()
    rebooted = pagers.Vm(build, os.path.join(short_tmp_path, 'b'), lender,
                         key, owner=vm.owner)
    vms.append(rebooted)
    rebooted.swap_out()
    anew = copies_in(rebooted.file, rebooted.pages)
    for copies in (again, anew):
        assert not [page for page in range(vm.pages)
                    if copies[page] == first[page]]
    assert rebooted.check() == 0


def test_another_vms_token_reaches_none_of_its_pages(build, lender, vms,
                                                     short_tmp_path):
    """The attacker's own lease (a token of ANOTHER VM) neither reads nor
    overwrites the VM's pages on the lender: the server refuses."""
    key = pager_tests.key_file(os.path.join(short_tmp_path, 'vm.key'))
    vm = pagers.Vm(build, os.path.join(short_tmp_path, 'a'), lender, key)
    vms.append(vm)
    vm.swap_out()
    attacker = paging.owner_of(str(uuid.uuid4()))
    with lender.client(attacker) as thief:
        assert thief.get(vm.owner, 0) == (REFUSED, None)
    with lender.client(attacker) as thief:
        assert thief.put(vm.owner, 0, b'\0' * PAGE) == (REFUSED, 0)
    assert vm.check() == 0
    stats = vm.stats()
    assert stats['bad_sum'] == [0, 0] and stats['served'][1] == 0, stats


# page_sum of pager.c (plaintext pagers): a keyless 64-bit hash, so an
# attacker who reads a page can write another with the same sum.
SUM_START, SUM_MUL, MASK = 0x9e3779b97f4a7c15, 0xff51afd7ed558ccd, 2**64 - 1


def _mix(h, word, i):
    h = (h ^ ((word + i) & MASK)) * SUM_MUL & MASK
    return h ^ (h >> 29)


def page_sum(words):
    h = SUM_START
    for i, word in enumerate(words):
        h = _mix(h, word, i)
    return h


def forged_to_its_sum(page):
    """``page`` with its first words made the attacker's and its last
    word chosen so that page_sum stays the same."""
    words = list(struct.unpack('<512Q', page))
    target = page_sum(words)
    words[:3] = struct.unpack('<3Q', b'ROOT_PASSWORD=letmein\n\0\0')
    h = SUM_START
    for i, word in enumerate(words[:-1]):
        h = _mix(h, word, i)
    # Undo the last step: the xorshift, the multiplication, the xor.
    x = target ^ (target >> 29) ^ (target >> 58)
    x = x * pow(SUM_MUL, -1, 2 ** 64) & MASK
    words[-1] = ((x ^ h) - 511) & MASK
    assert page_sum(words) == target
    return struct.pack('<512Q', *words)


@pytest.mark.parametrize('sealed', [True, False])
def test_a_page_forged_to_keep_its_checksum(build, lender, vms,
                                            short_tmp_path, sealed):
    """Finding 1's forgery: the lender reads pages and writes back its own
    text in them, each keeping the checksum the pager checks. A plaintext
    pager (every pager before #25) serves them to the guest; a sealed one
    refuses them all and serves the file's copies."""
    key = (pager_tests.key_file(os.path.join(short_tmp_path, 'vm.key'))
           if sealed else None)
    vm = pagers.Vm(build, os.path.join(short_tmp_path, 'a'), lender, key)
    vms.append(vm)
    vm.swap_out()
    copies = LenderCopies(lender, vm.owner)
    forged = range(1024, 1024 + 64)
    for page in forged:
        copies.write(page, forged_to_its_sum(copies.read(page)))
    wrong = vm.check()
    stats = vm.stats()
    if sealed:
        assert wrong == 0
        assert stats['bad_sum'] == [len(forged), 0], stats
    else:
        assert wrong >= 3 * len(forged)
        assert stats['bad_sum'] == [0, 0], stats


def process_memory(pid):
    """Every readable mapping of process ``pid``, read as root can."""
    chunks = []
    with open('/proc/%d/maps' % pid) as maps, \
            open('/proc/%d/mem' % pid, 'rb', buffering=0) as mem:
        for line in maps:
            span, perms = line.split()[:2]
            start, end = (int(x, 16) for x in span.split('-'))
            if perms[0] != 'r' or '[vvar' in line or '[vsyscall' in line:
                continue
            try:
                mem.seek(start)
                chunks.append(mem.read(end - start))
            except OSError:
                continue
    return b''.join(chunks)


@pytest.mark.parametrize('sealed', [True, False])
def test_a_secret_in_paged_memory_is_nowhere_in_the_clear(
        build, lender, vms, short_tmp_path, sealed):
    """A secret on every page of a VM's memory, all of it paged out: what
    the lender gives the attacker for the VM's owner, the lender's whole
    memory, the file store, the pool and the state file hold it nowhere
    when the pager seals (and everywhere but the state file when it does
    not, as before #25)."""
    secret = 'ROOT_PASSWORD=%s' % uuid.uuid4().hex
    key = (pager_tests.key_file(os.path.join(short_tmp_path, 'vm.key'))
           if sealed else None)
    pool = os.path.join(short_tmp_path, 'pool')
    vm = pagers.Vm(build, os.path.join(short_tmp_path, 'a'), lender, key,
                   pool=pool, secret=secret)
    vms.append(vm)
    out = vm.swap_out()
    assert out['pool_pages'] == vm.pages, out

    def contents(path):
        with open(path, 'rb') as data:
            return data.read()
    places = {
        'the lender, asked': LenderCopies(lender, vm.owner).read_all(
            vm.pages),
        'the lender\'s memory': process_memory(lender.process.pid),
        'the file store': contents(vm.file),
        'the pool': contents(pool),
        'the state file': contents(os.path.join(vm.process.directory,
                                                'pager.state')),
    }
    found = {name for name, data in places.items()
             if secret.encode() in data}
    assert found == (set() if sealed else set(places) - {'the state file'})
    assert vm.check() == 0


def test_a_page_tampered_in_every_store_stops_the_guest_not_zeros(
        build, lender, vms, short_tmp_path):
    """Issue 36: with every copy of 5 pages forged (the lender's and the
    file's), the guest read zeros for them, 2,560 wrong words, and no
    one was told. Now the pager does not serve such a page: the guest's
    access waits at it (its `check` never answers), the pager counts
    it and names the page in its stats, and the copies stay as found
    for the operator."""
    key = pager_tests.key_file(os.path.join(short_tmp_path, 'vm.key'))
    vm = pagers.Vm(build, os.path.join(short_tmp_path, 'a'), lender, key,
                   guest=('-r', '1', '-t', '1'))
    vms.append(vm)
    vm.swap_out()
    tampered = range(100, 105)
    for copies in (LenderCopies(lender, vm.owner), FileCopies(vm.file)):
        for page in tampered:
            copies.write(page, flipped(copies.read(page)))
    vm.process.send('check')
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        stats = vm.stats()
        if stats.get('unauthentic'):
            break
        if not vm.process.child_lines.empty():
            break                       # the guest answered: served
        time.sleep(0.2)
    assert vm.process.child_lines.empty(), vm.process.answer()
    stats = vm.stats()
    assert stats['unauthentic'] >= 1, stats
    assert stats['unauthentic_page'] == tampered[0], stats
    assert stats['lost'] == 0 and stats['bad_sum'][0] >= 1, stats
    assert stats['bad_sum'][1] >= 1, stats
