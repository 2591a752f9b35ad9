"""The libvirt driver against libvirt's test:///default driver.

Each test:///default connection is private, so the tests define their
domains through the connection the driver uses. What that driver cannot
do (updateDeviceFlags) is checked with a small fake domain; the real
thing is memcanal/tests/functional/test_libvirt.py.
"""

import uuid
from xml.etree import ElementTree

import pytest

from memcanal.agent import manager
from memcanal import exception
from memcanal.rpc import reports

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
    assert driver.memory_now(vm, 'balloon') == 768 * MIB




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


def test_memory_now_is_the_domains_not_the_target(fake):
    """What a resize reached is virDomainGetInfo's memory (the guest's
    balloon as the hypervisor sees it), however far from the target."""
    domain, driver = fake()
    driver.apply_memory_target(domain.uuid, 300 * MIB, 'balloon')
    domain.balloon_kib = 400 * 1024     # the guest gave back 112 MiB of 224
    assert driver.memory_now(domain.uuid, 'balloon') == 400 * MIB


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
