"""The libvirt driver samples and pages domains through their pagers.

A fake QEMU (a real process, ``-uuid`` on its command line, its RAM in
memfds, offering it as libmemcanal-uffd.so does) and a fake
memcanal-pager (a real detached process speaking the control protocol)
stand for the real ones, which memcanal/tests/functional/
test_libvirt_sampling.py runs.
"""

import json
import os
import signal
import socket
import subprocess
import threading
import time
import uuid
from xml.etree import ElementTree

import numpy as np
import pytest

from memcanal.agent import driver as agent_driver
from memcanal.agent.drivers import handoff
from memcanal.agent.drivers import domain_pagers
from memcanal.agent.drivers import paged
from memcanal.agent import paging
from memcanal.estimation import mrc
from memcanal import exception
from memcanal.tests.unit.agent import fake_pager

libvirt = pytest.importorskip('libvirt',
                              reason='libvirt-python is not installed')

from memcanal.agent.drivers import libvirt as libvirt_driver  # noqa: E402

PAGE = paging.PAGE
PAGES = 256                       # the fake QEMU's 1 MiB

PAGED_XML = '''<domain type='kvm'
    xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'>
  <uuid>%s</uuid>
  <memory unit='KiB'>%d</memory>
  <devices><memballoon model='none'/></devices>
  <qemu:commandline>
    <qemu:env name='LD_PRELOAD' value='/usr/lib/libmemcanal-uffd.so'/>
    <qemu:env name='MEMCANAL_PAGER_SOCKET' value='%s'/>
  </qemu:commandline>
</domain>'''


def wait(predicate, what, timeout=10):
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        assert time.monotonic() < deadline, what
        time.sleep(0.02)
    return value


class PagedDomain:
    """A domain whose QEMU (a fake one, started by ``start``) preloads
    the shim."""

    def __init__(self, socket_path, qemu_binary):
        self.uuid = str(uuid.uuid4())
        self.socket_path = socket_path
        self.qemu_binary = qemu_binary
        self.qemu = None

    def start(self, resident=128):
        self.qemu = subprocess.Popen(
            [self.qemu_binary, '-uuid', self.uuid, '-m', '1', '--resident',
             str(resident)], stdout=subprocess.PIPE, text=True,
            env=dict(os.environ, MEMCANAL_PAGER_SOCKET=self.socket_path))

    def destroy(self):
        if self.qemu is not None and self.qemu.poll() is None:
            self.qemu.kill()
            self.qemu.wait()

    def memfd(self):
        """QEMU's guest RAM, to see what is resident."""
        fd_dir = '/proc/%d/fd' % self.qemu.pid
        for name in os.listdir(fd_dir):
            if os.readlink(os.path.join(fd_dir, name)).startswith(
                    '/memfd:fake-ram'):
                return os.open(os.path.join(fd_dir, name), os.O_RDONLY)
        raise AssertionError('no memfd')

    def UUIDString(self):
        return self.uuid

    def isActive(self):
        return self.qemu is not None and self.qemu.poll() is None

    def XMLDesc(self, flags=0):
        return PAGED_XML % (self.uuid, PAGES * PAGE // 1024,
                            self.socket_path)

    def info(self):
        return [1, PAGES * 4, PAGES * 4, 1, 0]

    def memoryStats(self):
        return {}


class Connection:
    def __init__(self, domain):
        self.domain = domain

    def lookupByUUIDString(self, uuid):
        return self.domain

    def listAllDomains(self, flags):
        if flags == libvirt.VIR_CONNECT_LIST_DOMAINS_ACTIVE:
            return [self.domain] if self.domain.isActive() else []
        return [self.domain]


@pytest.fixture
def host(conf, short_tmp_path):
    """A libvirt host with one domain set up for paging (not started),
    its pagers fake memcanal-pagers sampling at rate 0.5; ``make()`` a
    LibvirtDriver on it, as an agent starting."""
    pager_binary, qemu_binary = fake_pager.write(short_tmp_path)
    for name, value, group in (
            ('binary', pager_binary, 'pager'),
            ('state_dir', os.path.join(short_tmp_path, 'pagers'), 'pager'),
            ('local_store_dir', os.path.join(short_tmp_path, 'pages'),
             'pager'),
            ('cold_after', 0.2, 'pager'),
            ('timeout', 10.0, 'pager'),
            ('report_interval', 0.1, 'agent'),
            ('rate', 0.5, 'sampling'),
            ('dirty_rate_mode', 'off', 'libvirt')):
        conf.set_override(name, value, group)
    domain = PagedDomain(os.path.join(short_tmp_path, 'run', 'vm.sock'),
                         qemu_binary)
    drivers = []

    def make():
        drivers.append(libvirt_driver.LibvirtDriver(conf, 'compute-1',
                                                    Connection(domain)))
        return drivers[-1]
    yield domain, make
    for hypervisor in drivers:
        hypervisor.stop()
    domain.destroy()
    for record in paged.records(conf):
        pager = paged.VmPager.adopt(conf, record)
        pager.process.kill()
        pager.forget()


def pager_of(hypervisor, domain):
    return wait(lambda: hypervisor.pagers.pager(domain.uuid),
                'no pager for the domain')


# Pages 0-31 are touched in a first full pass: those outside the sample
# are then in doubt (touched since the last full pass) and never cold;
# the others are cold once cold_after passed without a touch.
IN_DOUBT = np.flatnonzero(~mrc.sample_mask(PAGES, 0.5).view(bool)[:32])


def inject(pager, **queued):
    pager.client.command('inject ' + json.dumps(queued))


def interval(index, touched, full=False):
    return {'index': index, 'start_ns': 0, 'end_ns': 1, 'full': full,
            'touched': [first for page in touched for first in (page, 1)],
            'written': []}


def test_pager_socket_is_read_from_the_domain_xml():
    root = ElementTree.fromstring(PAGED_XML % ('u', 1024, '/run/x.sock'))
    assert domain_pagers.pager_socket(root) == '/run/x.sock'
    assert domain_pagers.pager_socket(ElementTree.fromstring(
        '<domain/>')) is None


def test_a_sampled_domain_gets_its_pager_as_it_starts(host, conf):
    domain, make = host
    hypervisor = make()
    # The driver listens before the domain's QEMU starts (the socket is
    # connectable by libvirt's QEMU user).
    assert os.stat(domain.socket_path).st_mode & 0o777 == 0o666
    domain.start()
    # Its RAM went to a pager at once, which answered QEMU itself.
    assert domain.qemu.stdout.readline() == 'handed\n'
    pager = pager_of(hypervisor, domain)
    stats = pager.client.command('stats')
    state = paged.pager_file(conf, domain.uuid, '.state')
    assert stats['args'] == [
        '--socket', paged.pager_file(conf, domain.uuid, '.sock'),
        '--control', paged.pager_file(conf, domain.uuid, '.ctl'),
        '--state', state, '--owner', str(paging.owner_of(domain.uuid)),
        '--store', 'file:%s' % os.path.join(conf.pager.local_store_dir,
                                            domain.uuid + '.pages'),
        '--sample-rate', '0.5', '--sample-interval-ms', '100',
        '--full-pass-every', '12']
    # Detached: the agent's end is not the pager's.
    assert os.getsid(pager.process.pid) == pager.process.pid
    [record] = paged.records(conf)
    assert (record.uuid, record.pid) == (domain.uuid, pager.process.pid)

    # Each collection carries the intervals the pager completed.
    inject(pager, intervals=[interval(0, [1, 2, 3]), interval(1, [9])])
    sample = hypervisor.collect(domain.uuid)
    accesses = sample.accesses
    assert accesses.rate == 0.5
    assert [i.touched.tolist() for i in accesses.intervals] == [[1, 2, 3],
                                                                [9]]
    assert record.qemu is None and paged.records(conf)[0].qemu[0] == \
        domain.qemu.pid
    assert hypervisor.collect(domain.uuid).accesses.intervals == ()
    # Not paged: its memory is all resident.
    [info] = hypervisor.list_instances()
    assert info.resident_bytes is None


def test_paging_adds_the_stores_and_keeps_the_target(host, conf):
    domain, make = host
    hypervisor = make()
    domain.start()
    pager = pager_of(hypervisor, domain)
    memfd = domain.memfd()
    inject(pager, intervals=[interval(0, range(32), full=True)])
    hypervisor.collect(domain.uuid)
    time.sleep(0.3)
    resize = hypervisor.apply_memory_target(
        domain.uuid, 0, 'paging', ['tcp:10.0.0.5:7070'])
    assert resize == agent_driver.Resize('paging', 128 * PAGE, 0,
                                         resize.seconds)
    # The memory server is the pager's too, after the local store.
    assert pager.client.command('stats')['stores'][1:] == [
        'tcp:10.0.0.5:7070']
    assert paged.records(conf)[0].stores[1:] == ['tcp:10.0.0.5:7070']
    kept = len(IN_DOUBT)
    [info] = hypervisor.list_instances()
    assert (info.resident_bytes, info.paged_bytes) == (
        kept * PAGE, (128 - kept) * PAGE)
    assert np.flatnonzero(paging.resident_mask(memfd, PAGES)).tolist() == \
        IN_DOUBT.tolist()
    trace = hypervisor.collect(domain.uuid).paging_trace
    assert (trace.blocks.size, trace.direct_pages) == (128 - kept, kept)
    # The whole VM as the target pages everything back in.
    hypervisor.apply_memory_target(domain.uuid, PAGES * PAGE, 'paging')
    [info] = hypervisor.list_instances()
    assert info.paged_bytes == 0
    assert paged.records(conf)[0].resident_target == PAGES * PAGE
    os.close(memfd)


def test_unsampled_domains_are_held_until_paged(host, conf):
    domain, make = host
    conf.set_override('enabled', False, 'sampling')
    hypervisor = make()
    with pytest.raises(exception.ResizeFailed, match='not handed its RAM'):
        hypervisor.apply_memory_target(domain.uuid, 0, 'paging')
    domain.start()
    listener = hypervisor.pagers.listeners[domain.socket_path]
    wait(lambda: domain.uuid in listener.held(), 'no handoff held')
    assert hypervisor.pagers.pager(domain.uuid) is None
    # Collections of an unpaged, unsampled domain carry neither.
    sample = hypervisor.collect(domain.uuid)
    assert (sample.accesses, sample.paging_trace) == (None, None)
    resize = hypervisor.apply_memory_target(domain.uuid, 200 * PAGE,
                                            'paging', ['tcp:10.0.0.5:7070'])
    assert domain.qemu.stdout.readline() == 'handed\n'
    assert resize.previous_bytes == 128 * PAGE
    pager = hypervisor.pagers.pager(domain.uuid)
    args = pager.client.command('stats')['args']
    assert '--sample-rate' not in args
    assert args[args.index('--store') + 1] == 'tcp:10.0.0.5:7070'
    assert hypervisor.collect(domain.uuid).accesses is None


def test_a_restarted_agent_finds_its_pagers(host, conf):
    domain, make = host
    first = make()
    domain.start()
    pager = pager_of(first, domain)
    inject(pager, intervals=[interval(0, range(32), full=True)])
    first.collect(domain.uuid)
    time.sleep(0.3)
    first.apply_memory_target(domain.uuid, 0, 'paging')
    first.stop()
    # The pager serves on, and the shim offers nothing: nothing died.
    assert pager.alive()

    second = make()
    again = second.pagers.pager(domain.uuid)
    assert again.process.pid == pager.process.pid
    inject(again, intervals=[interval(5, [7])])
    assert [i.touched.tolist() for i in
            second.collect(domain.uuid).accesses.intervals] == [[7]]
    # What it paged out is the pager's; the target is kept.
    [info] = second.list_instances()
    assert info.resident_bytes == len(IN_DOUBT) * PAGE
    assert again.guest.paging and again.record.resident_target == 0
    assert again.guest.set_resident(64 * PAGE) == len(IN_DOUBT) * PAGE
    assert again.guest.resident_bytes() == 64 * PAGE


def test_a_pager_that_dies_is_taken_over(host, conf):
    domain, make = host
    hypervisor = make()
    domain.start()
    pager = pager_of(hypervisor, domain)
    inject(pager, intervals=[interval(0, range(32), full=True)])
    hypervisor.collect(domain.uuid)
    time.sleep(0.3)
    hypervisor.apply_memory_target(domain.uuid, 0, 'paging',
                                   ['tcp:10.0.0.5:7070'])
    os.kill(pager.process.pid, signal.SIGKILL)
    # The shim offers its RAM again on the domain's socket; the listener
    # relays it to a pager taking over, with the same state and stores.
    successor = wait(lambda: (hypervisor.pagers.pager(domain.uuid)
                              if hypervisor.pagers.pager(domain.uuid)
                              is not pager else None), 'no successor')
    assert successor.record.stores == pager.record.stores
    hello = wait(lambda: successor.client.command('hello').get('attached')
                 and successor.client.command('hello'), 'not attached')
    assert hello['adopted'] and hello['pid'] == domain.qemu.pid
    kept = len(IN_DOUBT)
    assert successor.client.command('stats')['out_pages'] == 128 - kept
    [info] = hypervisor.list_instances()
    assert (info.resident_bytes, info.paged_bytes) == (
        kept * PAGE, (128 - kept) * PAGE)
    assert hypervisor.pagers.pager(domain.uuid) is successor


def test_a_domain_that_stops_takes_its_pager_along(host, conf):
    domain, make = host
    hypervisor = make()
    domain.start()
    pager = pager_of(hypervisor, domain)
    hypervisor.collect(domain.uuid)
    domain.destroy()
    wait(lambda: not pager.alive(), 'the pager outlived its QEMU')
    assert hypervisor.list_instances() == []
    assert hypervisor.pagers.pager(domain.uuid) is None
    assert paged.records(conf) == []
    assert not os.path.exists(paged.pager_file(conf, domain.uuid, '.state'))


def offer(path, pid, regions, fds=None):
    """A shim's offer of ``regions`` from ``pid``, with a stand-in uffd
    and a memfd per region unless ``fds`` says otherwise."""
    connection = socket.socket(socket.AF_UNIX)
    connection.settimeout(10)
    connection.connect(path)
    if fds is None:
        fds = [os.eventfd(0)] + [os.memfd_create('r') for _ in regions]
    socket.send_fds(connection, [handoff.pack(pid, regions)], fds)
    for fd in fds:
        os.close(fd)
    return connection


def test_the_listener_holds_one_handoff_per_domain(short_tmp_path):
    path = os.path.join(short_tmp_path, 'shared.sock')
    listener = handoff.Listener(path, uuid_of={1: 'vm-a', 2: 'vm-b'}.get)
    regions = [(0x7f0000000000, 64 * PAGE, 0), (0x7e0000000000, PAGE, 0)]
    try:
        first = offer(path, 1, regions)
        second = offer(path, 2, regions[:1])
        wait(lambda: listener.held() == {'vm-a', 'vm-b'}, 'not held')
        held = listener.take('vm-a')
        assert (held.pid, held.regions, held.length, len(held.fds)) == (
            1, regions, 65 * PAGE, 3)
        assert not held.reoffer and listener.take('vm-a') is None
        held.close()
        assert first.recv(1) == b''
        # The shim offers a taken handoff again, its pager having died:
        # held, as a re-offer.
        again = offer(path, 1, regions)
        wait(lambda: 'vm-a' in listener.held(), 'no re-offer held')
        assert listener.take('vm-a').reoffer
        # Not a domain's QEMU, or not what its header says: closed.
        assert offer(path, 3, regions[:1]).recv(1) == b''
        assert offer(path, 2, regions, fds=[os.eventfd(0)]).recv(1) == b''
        assert listener.held() == {'vm-b'}
        listener.drop_abandoned()
        assert listener.held() == {'vm-b'}
        # QEMU exited: its handoff (and guest RAM) is let go.
        second.close()
        wait(lambda: (listener.drop_abandoned(), listener.held())[1]
             == set(), 'not dropped')
        again.close()
    finally:
        listener.close()
    assert not os.path.exists(path)


def test_a_relay_hands_the_shims_connection_to_the_pager(short_tmp_path):
    """The pager gets QEMU's descriptors and its connection last, answers
    the relay, and talks to QEMU directly; the relay keeps nothing."""
    path = os.path.join(short_tmp_path, 'vm.sock')
    pager_path = os.path.join(short_tmp_path, 'pager.sock')
    listener = handoff.Listener(path, uuid_of=lambda pid: 'vm')
    pager = socket.socket(socket.AF_UNIX)
    pager.bind(pager_path)
    pager.listen(1)
    try:
        shim = offer(path, 7, [(0x7f0000000000, PAGE, 0)])
        wait(lambda: listener.held(), 'not held')
        held = listener.take('vm')
        relayed = []

        def serve():
            connection, _ = pager.accept()
            data, fds, _, _ = socket.recv_fds(connection, handoff.HEADER.size,
                                              4)
            relayed.append((data, fds))
            socket.socket(fileno=fds[-1]).sendall(b'k')
            connection.sendall(b'k')
        thread = threading.Thread(target=serve)
        thread.start()
        held.relay(pager_path, 10)
        thread.join()
        [(data, fds)] = relayed
        assert handoff.unpack(data, len(fds) - 1) == (
            7, [(0x7f0000000000, PAGE, 0)])
        assert len(fds) == 3 and held.fds == []
        assert shim.recv(1) == b'k'
        for fd in fds[:-1]:
            os.close(fd)
        # Once the pager's copy is gone too, QEMU sees the end: it would
        # offer its RAM again.
        assert shim.recv(1) == b''
    finally:
        listener.close()
        pager.close()


def test_a_pager_that_cannot_start_fails_the_paging(host, conf):
    domain, make = host
    conf.set_override('enabled', False, 'sampling')
    conf.set_override('binary', '/nonexistent/memcanal-pager', 'pager')
    hypervisor = make()
    domain.start()
    listener = hypervisor.pagers.listeners[domain.socket_path]
    wait(lambda: domain.uuid in listener.held(), 'no handoff held')
    with pytest.raises(exception.ResizeFailed, match='cannot start'):
        hypervisor.apply_memory_target(domain.uuid, 0, 'paging')
    # QEMU was let go: its shim gave up, the guest runs unpaged.
    assert domain.qemu.stdout.readline() == 'handoff failed\n'


def test_a_listener_whose_taker_fails_lets_the_offer_go(short_tmp_path):
    path = os.path.join(short_tmp_path, 'vm.sock')

    def take_now(uuid, offer):
        raise RuntimeError('broken')
    listener = handoff.Listener(path, uuid_of=lambda pid: 'vm',
                                take_now=take_now)
    try:
        shim = offer(path, 7, [(0x7f0000000000, PAGE, 0)])
        assert shim.recv(1) == b''
        assert listener.held() == set()
    finally:
        listener.close()
