"""Attacks on paged memory (issue #25, findings 1 and 3), against the real
memcanal-pager, memory server (TLS, lease tokens) and shim on loopback.

Before #25 a memory server's pages were the guest's plaintext, checked
by a checksum anyone could compute: whoever reached a page read it, and
a page rewritten to keep its checksum was served to the guest. A pool
file planted in /dev/shm by another user was used by a root pager, which
then put guest pages in it. Now every copy a pager gives away (memory
server, file store, pool) is AES-256-GCM ciphertext bound to its VM, page
and version under a key of the VM's; a copy that does not open is a bad
copy, and the next is served. The pool lives only in root's own
directory, in root's own file.

A pager's lease tokens are in files of root's alone, not on its command
line (which any local user reads in /proc): a token lets whoever holds it
delete that VM's copies on that server. Its memory server down as it
starts or takes over (a crash, or an attacker) costs the copies there,
not the guest: the pager serves from its file and uses the server again
once it is back; and a newer lease reaches a running pager.

The VMs are sample_guest under the shim (test_pager.SampledProcess):
every word of every page names the page and its version, and ``check``
counts the wrong ones. The attacker holds what a compromised lender has:
the VM's pages on the server (here a lease token for the VM's owner,
which a stolen token gives too), or the host's files.
"""

import base64
import json
import os
import struct
import subprocess
import uuid

from cryptography.hazmat.primitives.asymmetric import ed25519
import numpy as np
import pytest

from memcanal.agent import paging
from memcanal.agent.memserver import OK
from memcanal.agent.memserver import PAGE
from memcanal.agent.memserver import REFUSED
from memcanal.tests.functional import memservers
from memcanal.tests.functional import services
from memcanal.tests.functional import test_pager as pager_tests

pytestmark = pytest.mark.functional

NOBODY = 65534
POOL_MB = 80              # both VMs' pages, and A's twice over
BATCH = 1024              # pages a memory server's GET gives at most


@pytest.fixture(scope='module')
def build(tmp_path_factory):
    return services.build_pager(tmp_path_factory.mktemp('pager-build'))


@pytest.fixture
def lender(short_tmp_path):
    """A memory server as deployed: TLS, lease tokens, an admin socket."""
    directory = os.path.join(short_tmp_path, 'lender')
    os.mkdir(directory)
    server = memservers.Memserver(directory, 65536)
    yield server
    server.stop()


@pytest.fixture
def vms():
    started = []
    yield started
    for vm in started:
        vm.process.stop()


class Vm:
    """A VM's memory as its host pages it: its pager seals with ``key``
    (None: plaintext) and keeps a copy of each page on the lender (TLS,
    its lease token) and in a file, in ``order``; the pool too if given.
    """

    def __init__(self, build, directory, lender, key, order=('lender',
                 'file'), pool=None, guest_mb=64, secret=None, owner=None,
                 quota=None, options=()):
        os.mkdir(directory)
        self.owner = owner or paging.owner_of(str(uuid.uuid4()))
        token = lender.token(self.owner, quota_pages=quota or guest_mb * 512)
        self.file = os.path.join(directory, 'pages')
        stores = {'lender': ('tls:%s' % lender.name,
                             base64.b64encode(token).decode()),
                  'file': 'file:%s' % self.file}
        options = ['--owner', str(self.owner), '--tls-ca', lender.ca,
                   *options]
        if pool:
            options += ['--pool', pool, '--pool-mb', str(POOL_MB)]
        self.process = pager_tests.SampledProcess(
            build, directory, 0, key=key,
            stores=[stores[name] for name in order], options=options,
            guest=('-m', str(guest_mb), '-r', '2', '-t', '2')
            + (('-S', secret) if secret else ()))
        self.pages = self.process.pages

    def swap_out(self):
        out = self.process.command('swapout 0 %d' % self.pages)
        assert out['dropped'] == self.pages and out['lost'] == 0, out
        return out

    def check(self):
        """The guest's wrong words, every page read back."""
        self.process.send('check')
        return self.process.answer()['check']

    def stats(self):
        return self.process.command('stats')


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
    other = Vm(build, os.path.join(short_tmp_path, 'b'), lender, key, order,
               pool, guest_mb=4)
    vms.append(other)
    vm = Vm(build, os.path.join(short_tmp_path, 'a'), lender, key, order,
            pool)
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
    vm = Vm(build, os.path.join(short_tmp_path, 'a'), lender, key)
    vms.append(vm)
    vm.swap_out()
    first = copies_in(vm.file, vm.pages)
    assert vm.check() == 0
    vm.swap_out()
    again = copies_in(vm.file, vm.pages)
    vm.process.stop()
    rebooted = Vm(build, os.path.join(short_tmp_path, 'b'), lender, key,
                  owner=vm.owner)
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
    vm = Vm(build, os.path.join(short_tmp_path, 'a'), lender, key)
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
    vm = Vm(build, os.path.join(short_tmp_path, 'a'), lender, key)
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
    vm = Vm(build, os.path.join(short_tmp_path, 'a'), lender, key,
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


def run_pager(build, directory, *options):
    """memcanal-pager started with ``options`` and told to quit: its
    exit status and stderr."""
    done = subprocess.run(
        [str(build / 'memcanal-pager'), '--socket',
         os.path.join(directory, 'pager.sock'), *options],
        input='quit\n', capture_output=True, text=True, timeout=60)
    return done.returncode, done.stderr


def as_nobody(path, mode):
    """A file at path created by uid 65534 with ``mode``, which holds
    what that user chose."""
    subprocess.run(
        ['setpriv', '--reuid=%d' % NOBODY, '--regid=%d' % NOBODY,
         '--clear-groups', 'sh', '-c',
         'umask 0; head -c 65536 /dev/zero > "$1"; chmod %o "$1"' % mode,
         'sh', path], check=True)


def state_of(path):
    """What is at path (None if nothing), as a pager must leave it."""
    if not os.path.lexists(path):
        return None
    status = os.lstat(path)
    content = (open(path, 'rb').read() if os.path.isfile(path)
               and not os.path.islink(path) else None)
    return status.st_uid, status.st_mode, status.st_size, content


def planted_in_dev_shm(directory):
    path = '/dev/shm/memcanal-planted-%s' % uuid.uuid4().hex[:8]
    as_nobody(path, 0o666)
    return path, 'its directory is writable by others (mode 1777)'


def in_root_directory(directory, mode=0o700):
    pools = os.path.join(directory, 'pools')
    os.mkdir(pools)
    os.chmod(pools, mode)
    return os.path.join(pools, 'pool')


def nobodys_file(directory):
    path = in_root_directory(directory, 0o755)
    with open(path, 'wb') as planted:
        planted.write(b'\0' * 65536)
    os.chmod(path, 0o600)
    os.chown(path, NOBODY, NOBODY)
    return path, 'owned by uid 65534, not 0'


def readable_file(directory):
    path = in_root_directory(directory)
    with open(path, 'wb') as planted:
        planted.write(b'\0' * 65536)
    os.chmod(path, 0o644)
    return path, 'mode 0644, not 0600'


def symbolic_link(directory):
    path = in_root_directory(directory)
    target = os.path.join(directory, 'target')
    with open(target, 'wb') as victim:
        victim.write(b'precious')
    os.chmod(target, 0o600)
    os.symlink(target, path)
    return path, 'a symbolic link'


def dangling_link(directory):
    path = in_root_directory(directory)
    os.symlink(os.path.join(directory, 'created-through-the-link'), path)
    return path, 'a symbolic link'


def fifo(directory):
    path = in_root_directory(directory)
    os.mkfifo(path, 0o600)
    return path, 'not a regular file'


def writable_directory(directory):
    return (in_root_directory(directory, 0o777),
            'its directory is writable by others (mode 0777)')


def nobodys_directory(directory):
    path = in_root_directory(directory)
    os.chown(os.path.dirname(path), NOBODY, NOBODY)
    return path, 'its directory is owned by uid 65534, not root'


@pytest.mark.parametrize('plant', [
    planted_in_dev_shm, nobodys_file, readable_file, symbolic_link,
    dangling_link, fifo, writable_directory, nobodys_directory],
    ids=lambda plant: plant.__name__)
def test_a_planted_pool_is_refused(build, short_tmp_path, plant):
    """Finding 3: a pool file another user planted (in /dev/shm, or that
    became theirs), a link at the pool's path, a FIFO, or a directory
    others may write: a root pager refuses to start, says why, and
    neither writes the file nor creates anything through the link."""
    path, why = plant(short_tmp_path)
    try:
        before = state_of(path)
        status, err = run_pager(
            build, short_tmp_path, '--pool', path, '--pool-mb', '8',
            '--key-file', pager_tests.key_file(
                os.path.join(short_tmp_path, 'vm.key')))
        assert status == 1, err
        assert 'pool %s refused: %s' % (path, why) in err, err
        assert state_of(path) == before
        assert not os.path.exists(os.path.join(short_tmp_path,
                                               'created-through-the-link'))
    finally:
        if path.startswith('/dev/shm/'):
            os.unlink(path)


def test_a_pool_in_roots_directory_is_made_roots_alone(build,
                                                       short_tmp_path):
    """The pool a pager creates is root's, mode 0600, whatever the umask;
    the next pager uses it."""
    path = in_root_directory(short_tmp_path, 0o755)
    old_umask = os.umask(0)
    try:
        for _ in range(2):
            assert run_pager(build, short_tmp_path, '--pool', path,
                             '--pool-mb', '8')[0] == 0
    finally:
        os.umask(old_umask)
    status = os.stat(path)
    assert (status.st_uid, status.st_mode & 0o7777) == (0, 0o600)
    assert status.st_size > 8 << 20


def secret_that(directory, name, content, how):
    """A file at ``name`` in ``directory`` meant to hold ``content`` for
    the pager alone (root's, 0600), made ``how`` instead: its path, and
    why the pager refuses it."""
    path = os.path.join(directory, name)
    if how == 'a directory':
        os.mkdir(path)
        return path, 'not a regular file'
    if how == 'a FIFO':
        os.mkfifo(path, 0o600)
        return path, 'not a regular file'
    if how == 'missing':
        return path, 'No such file or directory'
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, 'wb') as secret:
        secret.write(content)
    if how == 'readable':
        os.chmod(path, 0o644)
        return path, 'mode 0644, not 0600'
    if how == 'nobody\'s':
        os.chown(path, NOBODY, NOBODY)
        return path, 'owned by uid 65534, not 0'
    if how == 'short':
        os.truncate(path, len(content) - 1)
        return path, '%d bytes, not %d' % (len(content) - 1, len(content))
    if how == 'a symbolic link':
        link = os.path.join(directory, 'link')
        os.symlink(path, link)
        return link, 'a symbolic link'
    return path, None


NOT_THE_PAGERS_ALONE = ['readable', 'nobody\'s', 'short', 'a symbolic link',
                        'a directory', 'a FIFO', 'missing']


@pytest.mark.parametrize('how', NOT_THE_PAGERS_ALONE)
def test_a_key_file_not_the_pagers_alone_is_refused(build, short_tmp_path,
                                                    how):
    path, why = secret_that(short_tmp_path, 'vm.key', os.urandom(32), how)
    status, err = run_pager(build, short_tmp_path, '--key-file', path)
    assert status == 1, err
    assert 'key file %s refused: %s' % (path, why) in err, err


@pytest.mark.parametrize('how', NOT_THE_PAGERS_ALONE + ['not base64'])
def test_a_token_file_not_the_pagers_alone_is_refused(build, short_tmp_path,
                                                      how):
    """A lease token is given in a file (not on the command line, which
    every local user reads in /proc), checked as the key file is: a
    token another user could have written, or read, is refused."""
    owner = 17
    token = base64.b64encode(b'mclease1'.ljust(24, b'.') + struct.pack(
        '<Q', owner) + b'.' * 208)
    path, why = secret_that(short_tmp_path, 'lease.token', b'!' * len(
        token) if how == 'not base64' else token, how)
    status, err = run_pager(
        build, short_tmp_path, '--owner', str(owner), '--tls-ca',
        '/nonexistent/ca.pem', '--store', 'tls:127.0.0.1:1',
        '--store-token-file', path)
    assert status == 1, err
    assert ('token file %s refused: %s' % (path, why) if why else
            'a tls: store needs its lease token (240 bytes, base64)'
            ) in err, err


def other_ca(directory):
    """The CA file of a CA that signed nothing the lender has."""
    other = os.path.join(directory, 'other-ca')
    os.mkdir(other)
    return memservers.make_pki(other)[0]


@pytest.mark.parametrize('case', [
    'no CA', 'no token', 'another owner\'s token', 'another CA',
    'a token the service did not sign', 'a token for a tcp: store'])
def test_a_tls_store_the_pager_cannot_trust_is_refused(build, lender,
                                                       short_tmp_path, case):
    """The pager checks the lender's certificate against --tls-ca and
    presents the lease token given after the store; anything wrong and
    it refuses to start, saying why."""
    owner = paging.owner_of(str(uuid.uuid4()))
    token = lender.token(owner)
    ca = ['--tls-ca', lender.ca]
    store = ['--store', 'tls:%s' % lender.name]
    why = {
        'no CA': 'a tls: store needs --tls-ca',
        'no token': 'a tls: store needs its lease token',
        'another owner\'s token': 'the lease token is for owner %d, not '
                                  '%d' % (owner + 1, owner),
        'another CA': 'TLS failed (a certificate the CA did not sign',
        'a token the service did not sign': 'the server refused the lease '
                                            'token',
        'a token for a tcp: store': 'only tls: stores take a token',
    }[case]
    if case == 'no CA':
        ca = []
    elif case == 'another owner\'s token':
        token = lender.token(owner + 1)
    elif case == 'another CA':
        ca = ['--tls-ca', other_ca(short_tmp_path)]
    elif case == 'a token the service did not sign':
        token = lender.token(owner,
                             key=ed25519.Ed25519PrivateKey.generate())
    elif case == 'a token for a tcp: store':
        store = ['--store', 'tcp:%s' % lender.name]
    if case != 'no token':
        store += ['--store-token-file', pager_tests.token_file(
            base64.b64encode(token).decode())]
    status, err = run_pager(build, short_tmp_path, '--owner', str(owner),
                            *ca, *store)
    assert status == 1, err
    assert why in err, err


def test_a_tls_store_added_by_the_control_socket(build, lender,
                                                 short_tmp_path):
    """`store tls:HOST:PORT TOKEN` adds the lender as the agent adds it
    when it first pages; a token for another owner is refused there
    too, and the pager goes on."""
    owner = paging.owner_of(str(uuid.uuid4()))
    control = os.path.join(short_tmp_path, 'control')
    pager = subprocess.Popen(
        [str(build / 'memcanal-pager'), '--socket',
         os.path.join(short_tmp_path, 'pager.sock'), '--control', control,
         '--owner', str(owner), '--tls-ca', lender.ca],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert json.loads(pager.stdout.readline())['event'] == 'listening'
        client = pager_tests.socket_file(control)

        def send(line):
            client.write(line + '\n')
            client.flush()

        def command(line):
            send(line)
            return json.loads(client.readline())
        spec = 'tls:%s' % lender.name
        assert command('store %s %s' % (spec, base64.b64encode(
            lender.token(owner + 1)).decode())) == {
                'event': 'error', 'line': 'store: the lease token is for '
                'owner %d, not %d' % (owner + 1, owner)}
        assert command('store %s %s' % (spec, base64.b64encode(
            lender.token(owner)).decode())) == {
                'event': 'store', 'copies': 1, 'stores': [spec]}
        send('quit')
        assert pager.wait(30) == 0
    finally:
        if pager.poll() is None:
            pager.kill()
            pager.wait(10)


def restart(lender):
    """The lender, stopped, started again at its address with its
    certificate and lease key: empty, as a memory server after a crash."""
    directory = os.path.dirname(lender.admin_path)
    lender.process, _ = services.start_memserver(
        65536, '--tls-cert', os.path.join(directory, 'memserver.pem'),
        '--tls-key', os.path.join(directory, 'memserver-key.pem'),
        '--lease-key', os.path.join(directory, 'lease-key.pem'),
        '--admin', lender.admin_path, '--listen', lender.name)


@pytest.mark.parametrize('when', ['start', 'takeover'])
def test_a_pager_whose_lender_is_down_serves_and_uses_it_once_back(
        build, lender, vms, short_tmp_path, when):
    """The memory server is down as a pager starts, or as one takes over
    from a pager that died, its guest waiting on the pages it held out:
    the pager attaches all the same (before, it exited, and the guest
    waited for a pager that never came), serves every page from the file,
    and keeps pages on the lender again once it is back."""
    key = pager_tests.key_file(os.path.join(short_tmp_path, 'vm.key'))
    if when == 'start':
        lender.stop()
    # A pager started with its lender down pages to its file alone.
    vm = Vm(build, os.path.join(short_tmp_path, 'a'), lender, key,
            guest_mb=4, options=['--copies', '1'] if when == 'start' else [])
    vms.append(vm)
    vm.swap_out()
    if when == 'takeover':
        lender.stop()
        vm.process.kill_pager()
        vm.process.start_pager()
        attached = vm.process.event('attached')
        assert attached['adopted'], attached
        assert attached['out_pages'] == vm.pages, attached
    assert vm.check() == 0
    stats = vm.stats()
    assert stats['lost'] == 0 and stats['served'] == [0, vm.pages], stats

    restart(lender)

    def served_by_the_lender():
        vm.process.command('swapout 0 %d' % vm.pages)
        assert vm.check() == 0
        return vm.stats()['served'][0] > 0
    # Its back-off (at most 30 s) decides when it is tried again.
    services.wait_for(served_by_the_lender, 120, 'the lender in use again')
    assert vm.stats()['lost'] == 0


def test_a_newer_lease_of_its_lender_is_used_at_once(build, lender, vms,
                                                     short_tmp_path):
    """`store tls:HOST:PORT TOKEN` for the lender a pager has (a newer
    lease, as the service sends with a larger quota) makes the pager
    present the new token from its next connection on: pages past the
    old lease's quota go out. Before, the pager took the same server for
    a store of its own, which the swap-out then also needed a copy on,
    and the old lease's quota held."""
    key = pager_tests.key_file(os.path.join(short_tmp_path, 'vm.key'))
    vm = Vm(build, os.path.join(short_tmp_path, 'a'), lender, key,
            guest_mb=4, quota=64)
    vms.append(vm)
    # Its runs of 512 pages are PUTs a 64-page lease refuses whole.
    refused = vm.process.command('swapout 0 %d' % vm.pages)
    assert refused['dropped'] == 0 and refused['put_failed'][0] > 0, refused
    spec = 'tls:%s' % lender.name
    stores = {'event': 'store', 'copies': 2, 'stores': [spec, vm.file]}
    # Not a newer lease of this VM's: refused, the lease it has kept.
    assert vm.process.command('store %s %s' % (spec, base64.b64encode(
        lender.token(vm.owner + 1, quota_pages=vm.pages)).decode())) == {
            'event': 'error', 'line': 'store: the lease token is for owner '
            '%d, not %d' % (vm.owner + 1, vm.owner)}
    assert vm.process.command('store %s %s' % (spec, base64.b64encode(
        lender.token(vm.owner, quota_pages=vm.pages)).decode())) == dict(
            stores, renewed=True)
    vm.swap_out()
    assert vm.check() == 0
    stats = vm.stats()
    assert stats['served'] == [vm.pages, 0] and stats['lost'] == 0, stats
