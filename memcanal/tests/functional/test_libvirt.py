"""The libvirt driver on the real libvirtd (qemu:///system), on a TCG guest.

Needs libvirtd (tools/install-libvirt.sh) and the test guest
(tools/build-test-guest.sh; MEMCANAL_TEST_GUEST_DIR points elsewhere).
Without them the test skips, or fails under MEMCANAL_REQUIRE_SERVICES.
"""

import os
import shutil
import time
import uuid
from xml.etree import ElementTree

from oslo_utils import importutils
import pytest

from memcanal.agent import settle
from memcanal.agent.drivers import libvirt as libvirt_driver
from memcanal.tests.functional import services

libvirt = importutils.try_import('libvirt')

pytestmark = pytest.mark.functional

URI = 'qemu:///system'
MIB = 2 ** 20


DOMAIN = '''<domain type='qemu'>
  <name>memcanal-functional-%(short)s</name>
  <uuid>%(uuid)s</uuid>
  <metadata>
    <nova:instance xmlns:nova="http://openstack.org/xmlns/libvirt/nova/1.1">
      <nova:owner><nova:project uuid="functional-project">p</nova:project>
      </nova:owner></nova:instance></metadata>
  <maxMemory slots='2' unit='KiB'>2097152</maxMemory>
  <memory unit='KiB'>1048576</memory>
  <vcpu>1</vcpu>
  <os><type arch='x86_64' machine='q35'>hvm</type>
    <kernel>%(kernel)s</kernel><initrd>%(initrd)s</initrd>
    <cmdline>console=ttyS0 memcanal.workload=idle</cmdline></os>
  <cpu><numa><cell id='0' cpus='0' memory='524288' unit='KiB'/></numa></cpu>
  <devices>
    <serial type='file'><source path='%(log)s'/><target port='0'/></serial>
    <memballoon model='virtio'/>
    <memory model='virtio-mem'>
      <target><size unit='KiB'>524288</size><node>0</node>
        <block unit='KiB'>2048</block><requested unit='KiB'>0</requested>
      </target>
    </memory>
  </devices>
</domain>'''


def _wait(what, check, seconds, log):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.25)
    with open(log, errors='replace') as serial:
        tail = serial.read()[-2000:]
    pytest.fail('%s within %d s; guest serial log ends:\n%s' % (
        what, seconds, tail))


@pytest.fixture
def guest(short_tmp_path):
    """A running TCG guest: 512 MiB boot memory, a 512 MiB virtio-mem
    device of 2 MiB blocks (nothing requested), a virtio balloon.

    QEMU runs as libvirt's unprivileged user, which cannot reach files
    below a private directory (a clone in ``mktemp -d``), so the guest's
    kernel and initramfs are copied where it can, as an operator puts
    images where QEMU can read them.
    """
    images = short_tmp_path
    os.chmod(images, 0o755)
    files = {name: shutil.copy(path, images) for name, path in
             services.require_test_guest().items()
             if name in ('vmlinux', 'initramfs.gz')}
    if libvirt is None:
        services.missing('libvirt-python is not installed '
                         '(tools/install-libvirt.sh)')
    libvirt.registerErrorHandler(lambda _ctx, _error: None, None)
    try:
        connection = libvirt.open(URI)
    except libvirt.libvirtError as error:
        services.missing('libvirtd is not reachable on %s '
                         '(tools/install-libvirt.sh): %s' % (URI, error))
    log = os.path.join(images, 'serial.log')
    instance = str(uuid.uuid4())
    domain = connection.defineXML(DOMAIN % {
        'short': instance[:8], 'uuid': instance, 'kernel': files['vmlinux'],
        'initrd': files['initramfs.gz'], 'log': log})
    try:
        domain.create()
        _wait('the guest was not ready', lambda: os.path.exists(log) and (
            'memcanal-guest: ready' in open(log, errors='replace').read()),
            60, log)
        yield connection, domain, log
    finally:
        if domain.isActive():
            domain.destroy()
        domain.undefine()
        connection.close()


def _virtio_mem_current(domain):
    root = ElementTree.fromstring(domain.XMLDesc(0))
    return int(root.findtext('devices/memory/target/current')) * 1024


def test_balloon_then_hotplug(guest, conf):
    connection, domain, log = guest
    driver = libvirt_driver.LibvirtDriver(conf, 'compute-1', connection)
    instance = domain.UUIDString()
    [info] = [i for i in driver.list_instances() if i.uuid == instance]
    assert (info.project_id, info.allocated_bytes, info.target_bytes) == (
        'functional-project', 512 * MIB, None)
    assert driver.collect(instance).guest_stats['memory_bytes'] == 512 * MIB

    resize = driver.apply_memory_target(instance, 384 * MIB, 'balloon')
    assert (resize.previous_bytes, resize.target_bytes) == (512 * MIB,
                                                            384 * MIB)
    # What the agent reports the guest reached: libvirt's own view,
    # which follows QEMU's balloon-change event as the guest inflates.
    settled = settle.settle(driver, instance, resize, 20)
    assert (settled.reached_bytes, settled.lagged) == (384 * MIB, False), (
        settled)
    assert domain.memoryStats()['actual'] == 384 * 1024
    stats = driver.collect(instance).guest_stats
    assert stats['memory_bytes'] == 384 * MIB
    assert stats['balloon_actual_bytes'] == 384 * MIB
    [info] = [i for i in driver.list_instances() if i.uuid == instance]
    assert (info.allocated_bytes, info.target_bytes) == (512 * MIB,
                                                         384 * MIB)

    resize = driver.apply_memory_target(instance, 768 * MIB, 'hotplug')
    _wait('virtio-mem did not plug 256 MiB',
          lambda: _virtio_mem_current(domain) == 256 * MIB, 20, log)
    settled = settle.settle(driver, instance, resize, 20)
    assert (settled.reached_bytes, settled.lagged) == (768 * MIB, False), (
        settled)
    assert driver.collect(instance).guest_stats['memory_bytes'] == 768 * MIB
    [info] = [i for i in driver.list_instances() if i.uuid == instance]
    assert info.target_bytes == 768 * MIB
    # Page sampling works under TCG: a rate once a calculation ended.
    time.sleep(1.5)
    assert 'dirty_rate_mib_per_s' in driver.collect(instance).guest_stats
