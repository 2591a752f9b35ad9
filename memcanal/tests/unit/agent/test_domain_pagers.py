"""The libvirt driver samples and pages domains through their pagers.

A fake QEMU (a real process, its RAM in memfds and a real userfaultfd,
offering them as libmemcanal-uffd.so does, named by a pid file as
libvirt's QEMUs are) and a fake memcanal-pager (a real detached process
speaking the control protocol) stand for the real ones, which
memcanal/tests/functional/test_libvirt_sampling.py runs. Attackers
(test_handoff's actors, as nobody) try to pass for a domain's QEMU
(issue #25).
"""

import json
import os
import signal
import subprocess
import threading
import time
import uuid
from xml.etree import ElementTree

import numpy as np
import pytest

from memcanal.agent import driver as agent_driver
from memcanal.agent.drivers import domain_pagers
from memcanal.agent.drivers import paged
from memcanal.agent import paging
from memcanal.estimation import mrc
from memcanal import exception
from memcanal.tests.unit.agent import fake_pager
from memcanal.tests.unit.agent import test_handoff
from memcanal.tests.unit.agent.test_handoff import actors  # noqa: F401

libvirt = pytest.importorskip('libvirt',
                              reason='libvirt-python is not installed')

from memcanal.agent.drivers import libvirt as libvirt_driver  # noqa: E402

PAGE = paging.PAGE
PAGES = 256                       # the fake QEMU's 1 MiB
STORE, CA = fake_pager.STORE, fake_pager.CA


def lease(domain):
    """The lease tokens of a page action of ``domain`` to STORE."""
    return {STORE: fake_pager.lease_token(domain.uuid)}


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


wait = test_handoff.wait


class PagedDomain:
    """A domain whose QEMU (a fake one, started by ``start``) preloads
    the shim; libvirt's pid file of it in ``run_dir``."""

    def __init__(self, socket_path, qemu_binary, run_dir):
        self.uuid = str(uuid.uuid4())
        self.socket_path = socket_path
        self.qemu_binary = qemu_binary
        self.pid_file = os.path.join(run_dir, self.name() + '.pid')
        self.qemu = None
        # libvirt's job of the domain (jobStats): none, or a migration.
        self.job = {'type': libvirt.VIR_DOMAIN_JOB_NONE}

    def start(self, resident=128):
        self.qemu = subprocess.Popen(
            [self.qemu_binary, '-uuid', self.uuid, '-m', '1', '--resident',
             str(resident)], stdout=subprocess.PIPE, text=True,
            env=dict(os.environ, MEMCANAL_PAGER_SOCKET=self.socket_path))
        self.names(self.qemu.pid)

    def names(self, pid, written=None):
        """libvirt's pid file says ``pid`` is the domain's QEMU, written
        at ``written`` (time.time; default now)."""
        with open(self.pid_file, 'w') as pid_file:
            pid_file.write('%d\n' % pid)
        if written is not None:
            os.utime(self.pid_file, (written, written))

    def destroy(self):
        if self.qemu is not None and self.qemu.poll() is None:
            self.qemu.kill()
            self.qemu.wait()
        if os.path.exists(self.pid_file):
            os.unlink(self.pid_file)

    def name(self):
        return 'instance-' + self.uuid[:8]

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

    def jobStats(self, flags=0):
        return dict(self.job)


class Connection:
    def __init__(self, domain):
        self.domain = domain

    def lookupByUUIDString(self, uuid):
        return self.domain

    def lookupByName(self, name):
        if name != self.domain.name():
            raise libvirt.libvirtError('Domain not found: %s' % name)
        return self.domain

    def listAllDomains(self, flags):
        if flags == libvirt.VIR_CONNECT_LIST_DOMAINS_ACTIVE:
            return [self.domain] if self.domain.isActive() else []
        return [self.domain]


@pytest.fixture
def host(conf, short_tmp_path):
    """A libvirt host with one domain set up for paging (not started),
    its pagers fake memcanal-pagers sampling at rate 0.5, QEMU's group
    nogroup (test_handoff's attackers are in it); ``make()`` a
    LibvirtDriver on it, as an agent starting."""
    os.chmod(short_tmp_path, 0o755)
    pager_binary, qemu_binary = fake_pager.write(short_tmp_path)
    run_dir = os.path.join(short_tmp_path, 'libvirt')
    os.mkdir(run_dir)
    for name, value, group in (
            ('qemu_run_dir', run_dir, 'libvirt'),
            ('qemu_group', 'nogroup', 'libvirt'),
            ('binary', pager_binary, 'pager'),
            ('state_dir', os.path.join(short_tmp_path, 'pagers'), 'pager'),
            ('local_store_dir', os.path.join(short_tmp_path, 'pages'),
             'pager'),
            ('cold_after', 0.2, 'pager'),
            ('timeout', 10.0, 'pager'),
            ('report_interval', 0.1, 'agent'),
            ('rate', 0.5, 'sampling'),
            ('max_rate', 0.5, 'sampling'),
            ('tls_ca_file', CA, 'pooling'),
            ('dirty_rate_mode', 'off', 'libvirt')):
        conf.set_override(name, value, group)
    domain = PagedDomain(os.path.join(short_tmp_path, 'run', 'vm.sock'),
                         qemu_binary, run_dir)
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


def pass_then_cool(hypervisor, domain, pager):
    """Pages 0-31 touched in a full pass, collected, then cold_after
    (0.2 s) let pass: all but IN_DOUBT are cold."""
    inject(pager, intervals=[interval(0, range(32), full=True)])
    hypervisor.collect(domain.uuid)
    time.sleep(0.3)


def paged_out(hypervisor, domain, *stores_and_lease):
    """The domain started, its pages cold (pass_then_cool) and all paged
    out, to its local store (and ``stores_and_lease``'s, if given): its
    pager."""
    domain.start()
    pager = pager_of(hypervisor, domain)
    pass_then_cool(hypervisor, domain, pager)
    hypervisor.apply_memory_target(domain.uuid, 0, 'paging',
                                   *stores_and_lease)
    return pager


UUID_OF_NOVA_DOMAIN = '6f1c2b4e-3d5a-4c7b-9e8f-0a1b2c3d4e5f'


def test_pager_socket_is_read_from_the_domain_xml():
    root = ElementTree.fromstring(PAGED_XML % ('u', 1024, '/run/x.sock'))
    assert domain_pagers.pager_socket(root) == '/run/x.sock'
    assert domain_pagers.pager_socket(ElementTree.fromstring(
        '<domain/>')) is None
    # The domain's own socket comes first.
    assert domain_pagers.pager_socket(root, '/run/pagers') == '/run/x.sock'


def test_a_domain_without_a_socket_gets_the_wrappers():
    """nova's domains name no socket: the QEMU wrapper hands their RAM
    over on <pager_socket_dir>/<uuid>.sock."""
    root = ElementTree.fromstring(
        '<domain><uuid>%s</uuid></domain>' % UUID_OF_NOVA_DOMAIN)
    assert domain_pagers.pager_socket(root) is None
    assert domain_pagers.pager_socket(root, '/run/pagers') == (
        '/run/pagers/%s.sock' % UUID_OF_NOVA_DOMAIN)


def test_a_sampled_domain_gets_its_pager_as_it_starts(host, conf):
    domain, make = host
    hypervisor = make()
    # The driver listens before the domain's QEMU starts, on a socket
    # only root and QEMU's group may connect to.
    status = os.stat(domain.socket_path)
    assert (status.st_mode & 0o7777, status.st_uid, status.st_gid) == (
        0o660, 0, test_handoff.NOGROUP)
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
        '--key-file', paged.pager_file(conf, domain.uuid, '.key'),
        '--tls-ca', CA,
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
    pass_then_cool(hypervisor, domain, pager)
    resize = hypervisor.apply_memory_target(
        domain.uuid, 0, 'paging', [STORE], lease(domain))
    assert resize == agent_driver.Resize('paging', 128 * PAGE, 0,
                                         resize.seconds)
    # The memory server is the pager's too, after the local store, with
    # its lease token.
    stats = pager.client.command('stats')
    assert (stats['stores'][1:], stats['tokens'][1:]) == (
        [STORE], [lease(domain)[STORE]])
    [record] = paged.records(conf)
    assert (record.stores[1:], record.lease_tokens) == ([STORE],
                                                        lease(domain))
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


def test_a_collection_does_not_wait_for_a_page_out(host, monkeypatch):
    """A page-out takes as long as its pages take to reach their stores
    (86 s for 120 MiB on a loaded node): meanwhile the domain's reports
    go on, without its samples, which the next report after carries."""
    domain, make = host
    hypervisor = make()
    domain.start()
    pager = pager_of(hypervisor, domain)
    paging_out, release = threading.Event(), threading.Event()
    set_resident = paged.set_resident

    def slow_set_resident(*args):
        paging_out.set()
        release.wait(60)
        return set_resident(*args)
    monkeypatch.setattr(paged, 'set_resident', slow_set_resident)
    resize = threading.Thread(target=hypervisor.apply_memory_target,
                              args=(domain.uuid, 0, 'paging'))
    resize.start()
    try:
        assert paging_out.wait(10)
        inject(pager, intervals=[interval(0, [1, 2, 3])])
        collecting = threading.Thread(target=lambda: collected.append(
            hypervisor.collect(domain.uuid)))
        collected = []
        collecting.start()
        collecting.join(10)
        # Before the change the collection waited for the page-out,
        # which waits for the test: it would still be running.
        assert not collecting.is_alive()
        assert collected[0].accesses is None
    finally:
        release.set()
        resize.join(30)
    assert [i.touched.tolist() for i in hypervisor.collect(
        domain.uuid).accesses.intervals] == [[1, 2, 3]]


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
                                            'paging', [STORE],
                                            lease(domain))
    assert domain.qemu.stdout.readline() == 'handed\n'
    assert resize.previous_bytes == 128 * PAGE
    pager = hypervisor.pagers.pager(domain.uuid)
    stats = pager.client.command('stats')
    args = stats['args']
    assert '--sample-rate' not in args
    first = args.index('--store')
    assert args[first:first + 3] == ['--store', STORE, '--store-token-file']
    assert stats['tokens'][0] == lease(domain)[STORE]
    assert hypervisor.collect(domain.uuid).accesses is None


def test_a_restarted_agent_finds_its_pagers(host, conf):
    domain, make = host
    first = make()
    pager = paged_out(first, domain)
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
    pager = paged_out(hypervisor, domain, [STORE], lease(domain))
    os.kill(pager.process.pid, signal.SIGKILL)
    # The shim offers its RAM again on the domain's socket; the listener
    # relays it to a pager taking over, with the same state and stores.
    successor = wait(lambda: (hypervisor.pagers.pager(domain.uuid)
                              if hypervisor.pagers.pager(domain.uuid)
                              is not pager else None), 'no successor')
    assert successor.record.stores == pager.record.stores
    assert successor.client.command('stats')['tokens'] == [
        None, lease(domain)[STORE]]
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


def test_an_impostor_takes_no_sampled_domains_pager(host, conf, actors):
    """Anyone in QEMU's group with the domain's ``-uuid`` on its command
    line and its own memfd and uffd does not pass for the domain's QEMU:
    the domain keeps its pager, which no attacker's memory reaches."""
    domain, make = host
    hypervisor = make()
    domain.start()
    pager = pager_of(hypervisor, domain)
    assert domain.qemu.stdout.readline() == 'handed\n'
    impostor = test_handoff.attacker(actors, uuid=domain.uuid)
    for claimed in (impostor.pid, domain.qemu.pid):
        assert impostor.answer(impostor.offer(domain.socket_path,
                                              claimed)) == 'closed'
    listener = hypervisor.pagers.listeners[domain.socket_path]
    assert listener.refused == {'not_qemu': 2}
    assert hypervisor.pagers.pager(domain.uuid) is pager and pager.alive()
    assert pager.client.command('hello')['pid'] == domain.qemu.pid


def test_an_impostor_replaces_no_held_handoff(host, conf, actors):
    domain, make = host
    conf.set_override('enabled', False, 'sampling')
    hypervisor = make()
    domain.start()
    listener = hypervisor.pagers.listeners[domain.socket_path]
    wait(lambda: domain.uuid in listener.held(), 'no handoff held')
    impostor = test_handoff.attacker(actors, uuid=domain.uuid)
    assert impostor.answer(impostor.offer(
        domain.socket_path, domain.qemu.pid)) == 'closed'
    # The QEMU's handoff is the one held, and paging relays it.
    hypervisor.apply_memory_target(domain.uuid, 200 * PAGE, 'paging')
    assert domain.qemu.stdout.readline() == 'handed\n'
    assert hypervisor.pagers.pager(domain.uuid).client.command(
        'hello')['pid'] == domain.qemu.pid


def test_a_process_given_a_qemus_pid_is_not_its_qemu(host, conf, actors):
    """libvirt's pid file names a process that started after it was
    written: a pid reused once the domain's QEMU exited."""
    domain, make = host
    conf.set_override('enabled', False, 'sampling')
    hypervisor = make()
    listener = hypervisor.pagers.listeners[domain.socket_path]
    qemu = actors(uuid=domain.uuid)
    domain.names(qemu.pid, written=time.time() - 60)
    assert qemu.answer(qemu.offer(domain.socket_path)) == 'closed'
    assert listener.refused == {'reused_pid': 1}
    # Written after it started, the file names the domain's QEMU.
    domain.names(qemu.pid)
    shim = qemu.offer(domain.socket_path)
    wait(lambda: listener.held() == {domain.uuid}, 'not held')
    assert qemu.answer(shim, 0.2) == 'open'


def open_descriptors():
    return len(os.listdir('/proc/self/fd'))


def test_idle_connections_do_not_stop_a_qemus_handoff(host, conf, actors):
    """~330 idle connections used to exhaust the agent's descriptors:
    400 now leave it as it was, and the domain's QEMU hands its RAM
    over."""
    domain, make = host
    hypervisor = make()
    impostor = test_handoff.attacker(actors, uuid=domain.uuid)
    before = open_descriptors()
    assert impostor.command('idle %s 400' % domain.socket_path) == '400'
    assert open_descriptors() <= before + 2
    domain.start()
    pager_of(hypervisor, domain)
    assert domain.qemu.stdout.readline() == 'handed\n'
    assert hypervisor.pagers.listeners[domain.socket_path].refused == {
        'not_qemu': 400}
