"""The libvirt driver against libvirt's test:///default driver.

Each test:///default connection is private, so the tests define their
domains through the connection the driver uses. What that driver cannot
do (updateDeviceFlags) is checked with a small fake domain; the real
thing is memcanal/tests/functional/test_libvirt.py.
"""

import os
import socket
import sys
import time
import uuid
from xml.etree import ElementTree

import numpy as np
import pytest

from memcanal.agent import driver as agent_driver
from memcanal.agent.drivers import handoff
from memcanal.agent import manager
from memcanal.agent import paging
from memcanal import exception
from memcanal.rpc import reports
from memcanal.tests.unit.agent import test_paging

libvirt = pytest.importorskip('libvirt',
                              reason='libvirt-python is not installed')

from memcanal.agent.drivers import libvirt as libvirt_driver  # noqa: E402

MIB = 2 ** 20
PROJECT = '6f2c1c5e0a8b4b7fa3e1d2c3b4a59687'
NOVA = '''<metadata>
    <nova:instance xmlns:nova="http://openstack.org/xmlns/libvirt/nova/1.1">
      <nova:flavor name="m1.small"><nova:memory>1024</nova:memory></nova:flavor>
      <nova:owner><nova:project uuid="%s">demo</nova:project></nova:owner>
    </nova:instance></metadata>''' % PROJECT


def domain_xml(name, memory_mib=1024, metadata=NOVA):
    return '''<domain type='test'>
  <name>%s</name><uuid>%s</uuid>%s
  <memory unit='MiB'>%d</memory>
  <os><type arch='x86_64'>hvm</type></os>
  <devices><memballoon model='virtio'/></devices>
</domain>''' % (name, uuid.uuid4(), metadata, memory_mib)


@pytest.fixture
def driver(conf):
    connection = libvirt.open('test:///default')
    # The connection comes with a running domain "test"; stop it so the
    # tests see only their own.
    connection.lookupByName('test').destroy()
    yield libvirt_driver.LibvirtDriver(conf, 'compute-1', connection)
    connection.close()


def start(driver, name, **kwargs):
    domain = driver.connection.defineXML(domain_xml(name, **kwargs))
    domain.create()
    return domain.UUIDString()


def test_lists_active_domains_with_nova_project(driver):
    vm = start(driver, 'vm1')
    start(driver, 'bare', metadata='')
    driver.connection.defineXML(domain_xml('stopped'))
    instances = {i.uuid: i for i in driver.list_instances()}
    assert len(instances) == 2
    assert instances[vm].project_id == PROJECT
    assert instances[vm].allocated_bytes == 1024 * MIB
    assert instances[vm].target_bytes is None
    assert instances[vm].flavor == 'm1.small'
    bare = [i for i in instances.values() if i.uuid != vm][0]
    assert (bare.project_id, bare.flavor) == ('unowned', None)


def test_host_info_falls_back_to_get_info(driver, conf):
    conf.set_override('reserved_host_memory_mb', 512, 'libvirt')
    info = driver.host_info()
    assert info.memory_total_bytes == driver.connection.getInfo()[1] * MIB
    assert info.memory_reserved_bytes == 512 * MIB


def test_collect_maps_balloon_stats(driver):
    vm = start(driver, 'vm1')
    domain = driver.connection.lookupByUUIDString(vm)
    raw = domain.memoryStats()
    first = driver.collect(vm)
    assert first.trace is None and first.page_size == 4096
    stats = first.guest_stats
    assert stats['memory_bytes'] == 1024 * MIB
    assert stats['balloon_actual_bytes'] == raw['actual'] * 1024
    assert stats['balloon_usable_bytes'] == raw['usable'] * 1024
    assert stats['host_rss_bytes'] == raw['rss'] * 1024
    assert stats['used_bytes'] == (raw['available'] - raw['usable']) * 1024
    assert stats['balloon_major_fault'] == raw['major_fault']
    # Faults are per interval: none before a previous collection.
    assert 'major_faults' not in stats
    assert driver.collect(vm).guest_stats['major_faults'] == 0.0
    # test:///default has no dirty rate: tried once, then not again.
    assert 'dirty_rate_mib_per_s' not in stats
    assert driver._domains[vm].dirty_rate is False
    assert all(isinstance(value, float) for value in stats.values())


def test_the_agent_reports_libvirt_domains(driver, conf, tmp_path):
    """An agent on this driver sends a report the service accepts: guest
    statistics, no estimates (libvirt sees no page references)."""
    vm = start(driver, 'vm1')
    conf.set_override('state_path', str(tmp_path))
    agent = manager.AgentManager(conf, 'compute-1', driver)
    agent.host_uuid = str(uuid.uuid4())
    report = agent.build_report()
    reports.validate_report(report, conf.service.max_mrc_points,
                            conf.service.max_instances_per_report)
    [sample] = report['instances']
    assert (sample['uuid'], sample['project_id']) == (vm, PROJECT)
    assert sample['wss'] == {} and 'logs' not in sample
    assert sample['guest_stats']['memory_bytes'] == 1024 * MIB


def test_balloon_resize_reads_back(driver):
    vm = start(driver, 'vm1')
    resize = driver.apply_memory_target(vm, 768 * MIB, 'balloon')
    assert (resize.mechanism, resize.previous_bytes,
            resize.target_bytes) == ('balloon', 1024 * MIB, 768 * MIB)
    domain = driver.connection.lookupByUUIDString(vm)
    assert domain.info()[2] == 768 * 1024
    [instance] = driver.list_instances()
    assert (instance.allocated_bytes, instance.target_bytes) == (
        1024 * MIB, 768 * MIB)
    assert driver.collect(vm).guest_stats['memory_bytes'] == 768 * MIB


@pytest.mark.parametrize('target_mib, mechanism, reason', [
    (2048, 'balloon', 'boot memory'),       # a balloon cannot pass it
    (1536, 'hotplug', 'no virtio-mem'),     # no device to plug from
])
def test_a_resize_that_cannot_be_done_changes_nothing(driver, target_mib,
                                                      mechanism, reason):
    vm = start(driver, 'vm1')
    with pytest.raises(exception.ResizeFailed, match=reason):
        driver.apply_memory_target(vm, target_mib * MIB, mechanism)
    assert driver.connection.lookupByUUIDString(vm).info()[2] == 1024 * 1024
    assert driver.list_instances()[0].target_bytes is None


def test_unknown_instance(driver):
    missing = str(uuid.uuid4())
    with pytest.raises(exception.InstanceNotFound):
        driver.apply_memory_target(missing, 512 * MIB)
    with pytest.raises(exception.InstanceNotFound):
        driver.collect(missing)


def test_unknown_mechanism(driver):
    vm = start(driver, 'vm1')
    with pytest.raises(exception.ResizeFailed, match='mechanism'):
        driver.apply_memory_target(vm, 512 * MIB, 'teleport')


def test_paging_needs_the_pager_socket_in_the_domain_xml(driver):
    vm = start(driver, 'vm1')
    with pytest.raises(exception.ResizeFailed,
                       match='no MEMCANAL_PAGER_SOCKET'):
        driver.apply_memory_target(vm, 512 * MIB, 'paging',
                                   ['tcp:10.0.0.5:7070'])


VIRTIO_MEM_XML = '''<domain type='kvm'>
  <uuid>%s</uuid>
  <memory unit='KiB'>1048576</memory>
  <devices>
    <memory model='virtio-mem'>
      <target><size unit='KiB'>524288</size><node>0</node>
        <block unit='KiB'>2048</block><requested unit='KiB'>0</requested>
        <current unit='KiB'>0</current></target>
      <alias name='virtiomem0'/>
      <address type='pci' domain='0x0000' bus='0x03' slot='0x00'/>
    </memory>
  </devices>
</domain>'''


class FakeDomain:
    """A running QEMU domain with a virtio-mem device, as far as the
    driver's hotplug path sees it."""

    def __init__(self, uuid, balloon_kib=524288, fail=None):
        self.uuid = uuid
        self.balloon_kib = balloon_kib
        self.fail = fail
        self.calls = []

    def UUIDString(self):
        return self.uuid

    def XMLDesc(self, flags=0):
        return VIRTIO_MEM_XML % self.uuid

    def info(self):
        return [1, 1048576, self.balloon_kib, 1, 0]

    def setMemoryFlags(self, kib, flags):
        self.calls.append(('setMemoryFlags', kib, flags))
        self.balloon_kib = kib

    def updateDeviceFlags(self, xml, flags):
        self.calls.append(('updateDeviceFlags', xml, flags))
        if self.fail:
            raise libvirt.libvirtError(self.fail)


class FakeConnection:
    def __init__(self, domain):
        self.domain = domain

    def lookupByUUIDString(self, uuid):
        return self.domain

    def listAllDomains(self, flags):
        return [self.domain]


@pytest.fixture
def fake(conf):
    def make(**kwargs):
        domain = FakeDomain(str(uuid.uuid4()), **kwargs)
        return domain, libvirt_driver.LibvirtDriver(
            conf, 'compute-1', FakeConnection(domain))
    return make


def test_hotplug_requests_whole_blocks_above_boot_memory(fake):
    domain, driver = fake(balloon_kib=384 * 1024)
    resize = driver.apply_memory_target(domain.uuid, 767 * MIB, 'hotplug')
    assert resize.previous_bytes == 384 * MIB
    # The inflated balloon is emptied, then 255 MiB rounds up to blocks.
    assert domain.calls[0] == ('setMemoryFlags', 524288,
                               libvirt.VIR_DOMAIN_AFFECT_LIVE)
    _, xml, flags = domain.calls[1]
    assert flags == libvirt.VIR_DOMAIN_AFFECT_LIVE
    device = ElementTree.fromstring(xml)
    assert device.findtext('target/requested') == str(256 * 1024)
    assert device.find('address').get('bus') == '0x03'


def test_hotplug_beyond_device_or_below_boot_fails(fake):
    domain, driver = fake()
    with pytest.raises(exception.ResizeFailed, match='more than'):
        driver.apply_memory_target(domain.uuid, 1100 * MIB, 'hotplug')
    with pytest.raises(exception.ResizeFailed, match='below'):
        driver.apply_memory_target(domain.uuid, 256 * MIB, 'hotplug')
    assert domain.calls == []


def test_hotplug_libvirt_error_restores_balloon(fake):
    domain, driver = fake(balloon_kib=384 * 1024, fail='device busy')
    with pytest.raises(exception.ResizeFailed, match='device busy'):
        driver.apply_memory_target(domain.uuid, 768 * MIB, 'hotplug')
    assert domain.balloon_kib == 384 * 1024
    assert driver._state(domain.uuid).target_bytes is None


# -- paging ----------------------------------------------------------------

PAGES = test_paging.PAGES
PAGE = paging.PAGE
# A real memfd of PAGES pages, as guest RAM.
memfd = test_paging.memfd

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

# A memcanal-pager as the agent drives it: takes the relayed handoff,
# answers it, and pages the memfd it was handed (punch, write back).
FAKE_PAGER = '''#!%s
import ctypes, json, os, socket, sys
libc = ctypes.CDLL(None)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long,
                           ctypes.c_long]
listener = socket.socket(socket.AF_UNIX)
listener.bind(sys.argv[2])
listener.listen(1)
print(json.dumps({"event": "listening"}), flush=True)
connection, _ = listener.accept()
header, (uffd, memfd), _, _ = socket.recv_fds(connection, 40, 2)
connection.sendall(b"k")
pid, length = int.from_bytes(header[8:16], "little"), int.from_bytes(
    header[24:32], "little")
print(json.dumps({"event": "attached", "pid": pid, "len": length}),
      flush=True)
out = set()
for line in sys.stdin:
    verb, *numbers = line.split()
    pages = range(*(lambda s, c: (s, s + c))(*map(int, numbers or (0, 0))))
    if verb == "swapout":
        libc.fallocate(memfd, 3, pages[0] * 4096, len(pages) * 4096)
        out.update(pages)
        answer = {"dropped": len(pages)}
    elif verb == "swapin":
        os.pwrite(memfd, b"i" * 4096 * len(pages), pages[0] * 4096)
        out.difference_update(pages)
        answer = {"fetched": len(pages)}
    elif verb == "faults":
        answer = {"faults": [], "cancelled": [], "overflow": 0}
    else:
        answer = {"out_pages": len(out), "args": sys.argv[1:]}
    print(json.dumps(answer), flush=True)
''' % sys.executable


class PagedDomain:
    """A running domain whose QEMU preloads the shim, as far as the
    driver's paging sees it."""

    def __init__(self, uuid, socket_path):
        self.uuid, self.socket_path = uuid, socket_path

    def UUIDString(self):
        return self.uuid

    def XMLDesc(self, flags=0):
        return PAGED_XML % (self.uuid, PAGES * PAGE // 1024,
                            self.socket_path)

    def info(self):
        return [1, PAGES * 4, PAGES * 4, 1, 0]

    def memoryStats(self):
        return {}


class FakeShim:
    """What libmemcanal-uffd.so does in QEMU: hand the memfd (and a
    stand-in for the uffd) to the socket, then wait for the answer."""

    def __init__(self, path, memfd, pid=None):
        self.connection = socket.socket(socket.AF_UNIX)
        self.connection.settimeout(10)
        self.connection.connect(path)
        uffd = os.eventfd(0)
        socket.send_fds(self.connection, [handoff.HEADER.pack(
            handoff.MAGIC, pid or os.getpid(), 0x7f0000000000,
            PAGES * PAGE, 0)], [uffd, memfd])
        os.close(uffd)

    def answer(self):
        return self.connection.recv(1)


@pytest.fixture
def paged_driver(conf, short_tmp_path, monkeypatch):
    """The libvirt driver over one PagedDomain, its pager FAKE_PAGER, and
    every QEMU taken for that domain's."""
    binary = os.path.join(short_tmp_path, 'memcanal-pager')
    with open(binary, 'w') as script:
        script.write(FAKE_PAGER)
    os.chmod(binary, 0o755)
    for name, value, group in (
            ('binary', binary, 'pager'),
            ('local_store_dir', os.path.join(short_tmp_path, 'pages'),
             'pager'),
            ('cold_after', 0.2, 'pager'),
            ('report_interval', 0.1, 'agent'),
            ('dirty_rate_mode', 'off', 'libvirt')):
        conf.set_override(name, value, group)
    domain = PagedDomain(str(uuid.uuid4()),
                         os.path.join(short_tmp_path, 'run', 'vm.sock'))
    monkeypatch.setattr(handoff, 'qemu_uuid', lambda pid: domain.uuid)
    hypervisor = libvirt_driver.LibvirtDriver(conf, 'compute-1',
                                              FakeConnection(domain))
    yield domain, hypervisor
    hypervisor.stop()
    for state in hypervisor._domains.values():
        if state.pager is not None:
            state.pager.stop()


def test_pager_socket_is_read_from_the_domain_xml():
    root = ElementTree.fromstring(PAGED_XML % ('u', 1024, '/run/x.sock'))
    assert libvirt_driver.pager_socket(root) == '/run/x.sock'
    assert libvirt_driver.pager_socket(
        ElementTree.fromstring(domain_xml('vm'))) is None


def wait_held(listener, uuid):
    for _ in range(1000):
        if uuid in listener.held():
            return
        time.sleep(0.01)
    raise AssertionError('no handoff held for %s' % uuid)


def test_the_driver_holds_the_handoff_and_pages_through_its_pager(
        paged_driver, memfd):
    domain, hypervisor = paged_driver
    os.pwrite(memfd, b'd' * 128 * PAGE, 0)
    listener = hypervisor.listeners[domain.socket_path]
    # The driver listens before the domain's QEMU starts (the socket is
    # connectable by libvirt's QEMU user), and holds its handoff.
    assert os.stat(domain.socket_path).st_mode & 0o777 == 0o666
    shim = FakeShim(domain.socket_path, memfd)
    wait_held(listener, domain.uuid)

    resize = hypervisor.apply_memory_target(
        domain.uuid, 32 * PAGE, 'paging', ['tcp:10.0.0.5:7070'])
    # The pager answered the handoff, through the agent.
    assert shim.answer() == b'k'
    assert resize == agent_driver.Resize('paging', 128 * PAGE,
                                         32 * PAGE, resize.seconds)
    pager = hypervisor._domains[domain.uuid].pager
    assert pager.client.command('stats')['args'][2:] == [
        '--owner', str(paging.owner_of(domain.uuid)),
        '--store', 'tcp:10.0.0.5:7070', '--store', 'file:%s' % os.path.join(
            hypervisor.conf.pager.local_store_dir, domain.uuid + '.pages')]

    # No page references: every page turns cold after [pager]
    # cold_after unfaulted, and collections keep the target.
    time.sleep(0.3)
    assert hypervisor.collect(domain.uuid).paging_trace.blocks.size == 0
    [info] = hypervisor.list_instances()
    assert (info.resident_bytes, info.paged_bytes) == (32 * PAGE, 96 * PAGE)
    trace = hypervisor.collect(domain.uuid).paging_trace
    assert (trace.blocks.size, trace.reads.any()) == (96, False)
    assert trace.direct_pages == 32

    # The whole VM as the target pages everything back in.
    resize = hypervisor.apply_memory_target(domain.uuid, PAGES * PAGE,
                                            'paging')
    assert resize.previous_bytes == 32 * PAGE
    [info] = hypervisor.list_instances()
    assert info.paged_bytes == 0
    assert np.count_nonzero(paging.resident_mask(memfd, PAGES)) == 128

    # A pager exits with its guest's QEMU: the domain is no longer paged.
    pager.client.process.kill()
    pager.client.process.wait()
    [info] = hypervisor.list_instances()
    assert info.resident_bytes is None
    assert hypervisor._domains[domain.uuid].pager is None


def test_paging_a_domain_that_did_not_hand_its_ram_over_fails(
        paged_driver):
    domain, hypervisor = paged_driver
    with pytest.raises(exception.ResizeFailed, match='not handed its RAM'):
        hypervisor.apply_memory_target(domain.uuid, 0, 'paging')


def test_the_listener_holds_one_handoff_per_domain(short_tmp_path, memfd):
    path = os.path.join(short_tmp_path, 'shared.sock')
    listener = handoff.Listener(path, uuid_of={1: 'vm-a', 2: 'vm-b'}.get)
    try:
        first, second = FakeShim(path, memfd, 1), FakeShim(path, memfd, 2)
        wait_held(listener, 'vm-a')
        wait_held(listener, 'vm-b')
        held = listener.take('vm-a')
        assert (held.pid, held.length) == (1, PAGES * PAGE)
        assert listener.take('vm-a') is None
        held.close()
        assert first.answer() == b''
        # The shim offers a taken handoff again (to a pager taking
        # over): not held again, closed unanswered.
        assert FakeShim(path, memfd, 1).answer() == b''
        # Not a domain's QEMU: closed.
        assert FakeShim(path, memfd, 3).answer() == b''
        assert listener.held() == {'vm-b'}
        listener.drop_abandoned()
        assert listener.held() == {'vm-b'}
        # QEMU exited: its handoff (and guest RAM) is let go.
        second.connection.close()
        listener.drop_abandoned()
        assert listener.held() == set()
    finally:
        listener.close()
    assert not os.path.exists(path)
