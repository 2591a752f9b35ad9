"""The libvirt driver pages a real libvirt domain it does not sample.

The test guest runs as a domain of the real libvirtd with its RAM in a
shared memfd and libmemcanal-uffd.so preloaded by ``<qemu:env>``
(doc/paging.md, "libvirt guests"). With [sampling] off, the LibvirtDriver
listens on the domain's pager socket before the domain starts and holds
its QEMU's handoff; apply_memory_target(mechanism='paging') starts the
domain's memcanal-pager with a memory server (TLS, with the lease token
of a pooling page action) as its first store and relays the handoff to
it. The guest writes DATA_MB of random data and
notes its md5sum; the driver keeps it to TARGET_MB resident (unsampled,
the detector knows faults only: pages go out once unfaulted for
cold_after), its data goes to the memory server (and the local file
store), its check passes with the data faulting back, and the whole VM
as the target pages everything back in. test_libvirt_sampling.py runs
the sampled path.
"""

import gzip
import os
import pathlib
import time
import uuid

import pytest

from memcanal.agent.drivers import libvirt as libvirt_driver
from memcanal.agent import paging
from memcanal.service import lease_tokens
from memcanal.tests.functional import memservers
from memcanal.tests.functional import services
from memcanal.tests.functional import test_guest_paging as guest_paging
from memcanal.tests.functional import test_paging_carriers as carriers

pytestmark = pytest.mark.functional

# Fixtures shared with the carriers' tests: the pager and shim built, a
# directory libvirt's QEMU can use, the system libvirtd.
build = carriers.build
scratch = carriers.scratch
libvirt_connection = carriers.libvirt_connection

MiB = 2 ** 20
DATA_MB = guest_paging.DATA_MB
TARGET_MB = 32
COLD_AFTER = 2.0

# The guest's /init: test_guest_paging's, checking its data at every
# line on its console rather than once, so it can be checked paged out
# and again paged back in.
PAGELOOP = guest_paging.PAGECHECK.replace(
    b'read command\n', b'while read command; do\n').replace(
    b'poweroff -f', b'done\npoweroff -f')


class OneDomain:
    """The system libvirtd's connection, listing only this test's domain:
    the driver must not listen on other tests' pager sockets."""

    def __init__(self, connection, instance):
        self._connection = connection
        self._instance = instance

    def listAllDomains(self, flags):
        return [domain for domain in self._connection.listAllDomains(flags)
                if domain.UUIDString() == self._instance]

    def __getattr__(self, name):
        return getattr(self._connection, name)


@pytest.fixture
def memory_server(conf, tmp_path):
    """A memory server as a lender runs it (TLS, lease tokens), whose CA
    the agent's pagers check it against."""
    server = memservers.Memserver(str(tmp_path / 'memserver'),
                                  2 * guest_paging.GUEST_MB * 256)
    conf.set_override('tls_ca_file', server.ca, 'pooling')
    yield server
    server.stop()


@pytest.fixture
def domain(build, scratch, libvirt_connection, tmp_path):
    """The test guest defined as a domain, not started, and a listener
    for its serial console."""
    guest = services.require_test_guest()
    initrd = tmp_path / 'initramfs-pageloop.gz'
    initrd.write_bytes(
        pathlib.Path(guest['initramfs.gz']).read_bytes()
        + gzip.compress(guest_paging.newc({'pagecheck': PAGELOOP})))
    files = carriers.readable_copies(scratch, kernel=guest['vmlinux'],
                                     initrd=initrd,
                                     shim=build / carriers.SHIM)
    console = os.path.join(scratch, 'console.sock')
    listener = carriers.console_listener(console)
    instance = str(uuid.uuid4())
    domain = libvirt_connection.defineXML(carriers.DOMAIN % dict(
        files, short=instance[:8], uuid=instance,
        memory_mb=guest_paging.GUEST_MB, console=console,
        socket=os.path.join(scratch, 'pager.sock')))
    yield domain, listener
    if domain.isActive():
        domain.destroy()
    domain.undefine()
    listener.close()


@pytest.fixture
def hypervisor(conf, build, scratch, domain, libvirt_connection):
    for name, value, group in (
            ('state_path', scratch, None),
            ('enabled', False, 'sampling'),
            ('report_interval', 1.0, 'agent'),
            ('binary', str(build / 'memcanal-pager'), 'pager'),
            ('local_store_dir', os.path.join(scratch, 'pages'), 'pager'),
            ('cold_after', COLD_AFTER, 'pager'),
            ('dirty_rate_mode', 'off', 'libvirt'),
            ('memory_stats_period', 0, 'libvirt')):
        conf.set_override(name, value, group)
    hypervisor = libvirt_driver.LibvirtDriver(
        conf, 'compute-1', OneDomain(libvirt_connection,
                                     domain[0].UUIDString()))
    yield hypervisor
    hypervisor.stop()


def start(hypervisor, domain):
    """Start the domain; once its QEMU handed its RAM to the driver,
    its console."""
    domain, listener = domain
    [held] = hypervisor.pagers.listeners.values()
    instance = domain.UUIDString()
    with carriers.UnprivilegedUserfaultfd():
        domain.create()
        deadline = time.monotonic() + 60
        while instance not in held.held():
            assert time.monotonic() < deadline, 'no handoff in 60 s'
            time.sleep(0.1)
    serial, _ = listener.accept()
    stream = serial.makefile('rw', errors='replace', newline='')
    return carriers.Console(stream, stream)


def collect_until(hypervisor, instance, done, timeout=120):
    """Collect every second, as the agent would, until ``done(info)``."""
    deadline = time.monotonic() + timeout
    while True:
        hypervisor.collect(instance)
        [info] = hypervisor.list_instances()
        if done(info):
            return info
        assert time.monotonic() < deadline, info
        time.sleep(1)


def test_the_libvirt_driver_pages_a_domain(hypervisor, domain,
                                           memory_server):
    instance = domain[0].UUIDString()
    console = start(hypervisor, domain)
    console.wait('pagecheck: written')

    store = 'tls:' + memory_server.name
    resize = hypervisor.apply_memory_target(
        instance, TARGET_MB * MiB, 'paging', [store],
        {store: lease_tokens.encode(memory_server.token(
            paging.owner_of(instance),
            quota_pages=2 * guest_paging.GUEST_MB * 256))})
    pager = hypervisor.pagers.pager(instance)
    qemu_pid = pager.record.qemu[0]
    before_kib = guest_paging.rss_shmem_kib(qemu_pid)
    assert resize.previous_bytes > DATA_MB * MiB, resize
    # Nothing is cold yet (libvirt gives no page references): the pages
    # go out once unfaulted for cold_after, as the collections find them.
    info = collect_until(hypervisor, instance, lambda info: (
        info.resident_bytes <= TARGET_MB * MiB * 2))
    paged_kib = guest_paging.rss_shmem_kib(qemu_pid)
    print('resize', resize, '\npaged', info, '\nRssShmem KiB before %d '
          'paged %d' % (before_kib, paged_kib))
    assert paged_kib < before_kib - DATA_MB * 1024
    assert info.paged_bytes > DATA_MB * MiB

    check(console)
    stats = pager.client.command('stats')
    print('after the check', stats)
    assert stats['lost'] == 0
    # The data came back from the memory server, the first store.
    assert stats['served'][0] > DATA_MB * 256 // 2, stats

    # The whole VM as the target pages everything back in.
    resize = hypervisor.apply_memory_target(
        instance, guest_paging.GUEST_MB * MiB, 'paging')
    [info] = hypervisor.list_instances()
    print('paged back in', resize, info)
    assert info.paged_bytes == 0
    assert guest_paging.rss_shmem_kib(qemu_pid) > paged_kib + DATA_MB * 1024
    check(console)


def check(console):
    console.send('check')
    verdict = console.wait('pagecheck: (ok|BAD)')
    assert 'pagecheck: ok' in verdict, ''.join(console.seen)
