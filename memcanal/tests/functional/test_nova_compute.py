"""A nova compute node, for real (issue #27): guests nova boots with its
own libvirt driver are measured, admitted, resized and pooled by
memcanal.

The node (compute_node.py) is nova 34, placement, glance, MariaDB and
RabbitMQ, with libvirtd running memcanal's QEMU wrapper as
doc/deployment.md installs it, and memcanal's API, service and agent as
processes. nova boots the test guest from glance (kernel, ramdisk and a
root image); nothing of memcanal's is in the domain XML nova writes.
Then, in order: memcanal's agent samples the guest (no memtrace);
``GET /hosts`` shows measured demand below the flavor; the overcommit
decision, approved, raises placement's ratio, and nova boots a second VM
that flavor size refused before; a memory-target decision balloons the
guest through libvirt; a pooling decision pages it to the memory server
of a second host and the guest's data check passes; nova
deletes the guests and memcanal forgets them.
"""

import gzip
import os
import pathlib
import re
import select
import subprocess
import tempfile
import time
from xml.etree import ElementTree

import pytest

from memcanal.agent import memserver
from memcanal.rpc import signing
from memcanal.tests.functional import compute_node
from memcanal.tests.functional import compute_node_conf as node_conf
from memcanal.tests.functional import guests
from memcanal.tests.functional import memservers
from memcanal.tests.functional import services
from memcanal.tests.functional import test_guest_paging as guest_paging

pytestmark = pytest.mark.functional

MiB = 2 ** 20
FLAVOR_MB = 256
# The node's memory for guests, as nova and memcanal count it: one VM of
# the flavor fits, two do not (at placement's ratio 1.0).
GUEST_MEMORY_MB = 448
DATA_MB = 64
HOT_MB = 32
INTERVAL = 1.0
# An operator's most for vm-1.
CEILING_MB = 192
LENDER = 'compute-2'
# The lender's agent: its memory server registered as its STAT says;
# the qemu driver, with no guests of its own (libvirt's are compute-1's).
LENDER_CONF = '''memserver_address = %s
memserver_admin_socket = %s
'''

# The guest's /init (rdinit=/pagecheck): the balloon's driver, the data,
# the hot loop, and a check of the data at each line on the console.
INIT = b'''#!/bin/busybox sh
for module in virtio_ring virtio virtio_pci_legacy_dev \\
        virtio_pci_modern_dev virtio_pci virtio_balloon; do
    /bin/busybox insmod "/lib/modules/$module.ko" 2>/dev/null
done
''' + guests.writes_data(DATA_MB)[len(b'#!/bin/busybox sh\n'):] + (
    guests.hot_loop_and_checks(HOT_MB))


def host_memory_mb():
    """The host's memory as nova's libvirt driver reads it (MiB)."""
    import libvirt
    connection = libvirt.open('qemu:///system')
    try:
        return connection.getInfo()[1]
    finally:
        connection.close()


def memcanal_conf(directory, build, keys, reserved_mb, memserver_ca):
    """The memcanal.conf doc/deployment.md gives a compute node that also
    runs memcanal's service (one file for both here)."""
    private, public = keys

    def write(urls, database, host=compute_node.HOST, extra=''):
        return compute_node.write(directory / f'{host}.conf', f"""[DEFAULT]
host = {host}
transport_url = {services.RABBIT_URL}
control_exchange = memcanal-{directory.name}
state_path = {directory}/memcanal-{host}
debug = true
[database]
connection = {database}
[api]
auth_strategy = keystone
{node_conf.authtoken(urls['keystone'], 'memcanal')}[agent]
driver = {'qemu' if extra else 'libvirt'}
report_interval = {INTERVAL}
service_public_key = {public}
[libvirt]
pager_socket_dir = {directory}/pagers
reserved_host_memory_mb = {reserved_mb}
dirty_rate_mode = off
[pager]
binary = {build}/memcanal-pager
[sampling]
enabled = true
rate = 0.1
interval = {INTERVAL}
full_pass_every = 2
[estimation]
prl_stability_window = {3 * INTERVAL}
[service]
periodic_interval = 1
instance_gone_after = 5
signing_key = {private}
[optimizer]
mode = recommend
optimize_interval = 5
# Resize whenever the target moves: one host, no contention to win.
min_benefit = 0
hold_seconds = 0
fault_rate_bound = 0.02
[placement]
enabled = true
max_ratio = 1.5
max_step = 0.5
{node_conf.password_auth(urls['keystone'], 'memcanal')}[pooling]
enabled = true
tls_ca_file = {memserver_ca}
{extra}""")
    return write


@pytest.fixture(scope='module')
def node():
    guest = services.require_test_guest()
    for venv in (compute_node.NOVA_VENV, compute_node.GLANCE_VENV):
        if not (venv / 'bin' / 'gunicorn').exists():
            services.missing('%s is not installed (tools/install-compute-'
                             'node.sh)' % venv)
    if not os.path.exists(os.path.join(services.KEYSTONE_VENV, 'bin',
                                       'keystone-manage')):
        services.missing('keystone is not installed (tools/keystone.sh '
                         'install)')
    services.require_rabbit()
    with tempfile.TemporaryDirectory(prefix='mc-nova-') as path:
        directory = pathlib.Path(path)
        os.chmod(directory, 0o755)
        build = services.build_pager(directory / 'build')
        os.chmod(build, 0o755)
        shim = build / 'libmemcanal-uffd.so'
        os.chmod(shim, 0o644)
        keys = (str(directory / 'service.key'),
                str(directory / 'service.pub'))
        signing.create_key_pair(*keys)
        reserved_mb = host_memory_mb() - GUEST_MEMORY_MB
        pki = directory / 'pki'
        pki.mkdir()
        ca, cert, key = memservers.make_pki(str(pki))
        write_conf = memcanal_conf(directory, build, keys, reserved_mb, ca)
        with compute_node.unprivileged_userfaultfd(), \
                compute_node.libvirtd_with_wrapper(
                    directory, shim, directory / 'pagers'), \
                compute_node.running_node(
                    directory, reserved_mb, write_conf) as running:
            initrd = gzip.compress(guest_paging.newc({'pagecheck': INIT}))
            kernel = running.image('kernel', 'aki', pathlib.Path(
                guest['vmlinux']).read_bytes())
            ramdisk = running.image('ramdisk', 'ari', pathlib.Path(
                guest['initramfs.gz']).read_bytes() + initrd)
            running.root_image = running.image(
                'test-guest', 'ami', b'\0' * MiB, kernel_id=kernel,
                ramdisk_id=ramdisk,
                os_command_line='console=ttyS0 panic=-1 rdinit=/pagecheck')
            running.flavor_id = running.flavor('m1.test', FLAVOR_MB)
            running.servers = {}
            # compute-2 lends memory: its memory server (TLS, lease
            # tokens the service signs), registered by its agent.
            admin = directory / 'memserver.admin'
            memserver, address = services.start_memserver(
                4 * FLAVOR_MB * 256, '--tls-cert', cert, '--tls-key', key,
                '--lease-key', keys[1], '--admin', admin)
            try:
                running.processes.start('memcanal-agent-lender', [
                    compute_node.MEMCANAL_BIN / 'memcanal-agent',
                    '--config-file', write_conf(
                        running.urls, running.memcanal_database, LENDER,
                        LENDER_CONF % ('%s:%d' % address, admin))])
                yield running
            finally:
                memserver.terminate()
                memserver.wait(10)


def qemu_of(server_id):
    """The pid of the QEMU libvirt runs for the server."""
    for pid in os.listdir('/proc'):
        if not pid.isdigit():
            continue
        try:
            with open('/proc/%s/cmdline' % pid, 'rb') as cmdline:
                args = cmdline.read().split(b'\0')
        except OSError:
            continue
        if b'-uuid' in args and args[args.index(b'-uuid') + 1] == (
                server_id.encode()):
            return int(pid)
    return None


def test_nova_boots_the_guest_and_memcanal_samples_it(node):
    server = node.boot('vm-1', node.root_image, node.flavor_id)
    node.servers['vm-1'] = server['id']
    node.wait_server(server['id'], ('ACTIVE',))
    services.wait_for(
        lambda: 'wsswork: phase=RW start' in node.console_log(server['id']),
        120, 'the guest to write its data and start its hot loop')
    # nova's domain, untouched: no memory backing, no QEMU environment.
    xml = subprocess.run(['virsh', '-c', 'qemu:///system', 'dumpxml',
                          server['id']], capture_output=True, text=True,
                         check=True).stdout
    root = ElementTree.fromstring(xml)
    assert root.find('memoryBacking') is None
    assert 'qemu:commandline' not in xml
    # The wrapper gave its QEMU shared RAM and the shim.
    pid = qemu_of(server['id'])
    maps = pathlib.Path('/proc/%d/maps' % pid).read_text()
    assert re.search(r' rw-s .*/memfd:', maps), maps
    environ = pathlib.Path('/proc/%d/environ' % pid).read_bytes()
    assert b'libmemcanal-uffd.so' in environ

    def sampled():
        instance = node.memcanal('/instances/%s' % server['id'])
        return instance.get('wss_bytes') and instance
    instance = services.wait_for(sampled, 120, 'memcanal to measure vm-1')
    print('memcanal instance', instance)
    reports = node.memcanal('/instances/%s/reports' % server['id'])
    print('reports', reports)


def pending(node, kind, host=compute_node.HOST):
    """The newest decision of ``kind`` for ``host`` that waits for an
    operator, once the optimizer made one."""
    [found] = [h['uuid'] for h in node.memcanal('/hosts')['hosts']
               if h['name'] == host]

    def recommended():
        for decision in node.memcanal('/decisions?host=%s&state='
                                      'recommended' % found)['decisions']:
            if decision['kind'] == kind:
                return decision
        return None
    return services.wait_for(recommended, 120, 'a %s decision' % kind)


def approve(node, decision, seconds=120):
    """Approve ``decision`` and wait until it is applied (``seconds`` at
    most): the decision."""
    response = node.memcanal_request(
        'POST', '/decisions/%s/approve' % decision['uuid'])
    assert response.status_code in (200, 202), response.text

    def applied():
        found = node.memcanal('/decisions/%s' % decision['uuid'])
        assert found['state'] not in ('failed', 'rejected'), found
        return found['state'] == 'applied' and found
    return services.wait_for(applied, seconds, 'decision %s applied' % (
        decision['uuid']))


def test_the_host_shows_measured_demand_below_the_flavor(node):
    server_id = node.servers['vm-1']

    def measured():
        [host] = [h for h in node.memcanal('/hosts')['hosts']
                  if h['name'] == compute_node.HOST]
        return host['demand_bytes'] and host
    host = services.wait_for(measured, 60, 'the node\'s demand')
    print('the node', host)
    assert host['allocated_bytes'] == FLAVOR_MB * MiB
    assert host['demand_bytes'] < FLAVOR_MB * MiB
    instance = node.memcanal('/instances/%s' % server_id)
    # What nova's domain metadata says of it.
    assert (instance['flavor'], instance['project_id']) == (
        'm1.test', node.session.get_project_id())


def test_overcommit_lets_nova_boot_what_flavor_size_refused(node):
    """Two VMs of the flavor overfill the node at placement's ratio 1.0:
    nova refuses the second. memcanal's allocation_ratio decision,
    approved, raises the ratio; nova then boots it, MemCanalFilter
    passing the host on measured demand."""
    refused = node.boot('vm-refused', node.root_image, node.flavor_id)
    server = node.wait_server(refused['id'], ('ERROR',))
    assert 'No valid host' in server['fault']['message'], server
    node.delete(refused['id'])
    before = node.memory_inventory()
    assert before['allocation_ratio'] == 1.0

    applied = approve(node, pending(node, 'allocation_ratio'))
    after = node.memory_inventory()
    print('ratio decision', applied, '\nMEMORY_MB', after)
    assert after['allocation_ratio'] > 1.0
    assert (after['total'] - after['reserved']) * after[
        'allocation_ratio'] >= 2 * FLAVOR_MB

    second = node.boot('vm-2', node.root_image, node.flavor_id)
    node.servers['vm-2'] = second['id']
    server = node.wait_server(second['id'], ('ACTIVE',))
    assert server['OS-EXT-SRV-ATTR:host'] == compute_node.HOST
    # nova's scheduler ran memcanal's filter on the host.
    assert 'Filter MemCanalFilter returned 1 host(s)' in node.processes.log(
        'nova-scheduler')


def domain_memory(server_id):
    """The domain's memory now, bytes (libvirt's: the balloon's size)."""
    import libvirt
    connection = libvirt.open('qemu:///system')
    try:
        return connection.lookupByUUIDString(server_id).info()[2] * 1024
    finally:
        connection.close()


def test_a_memory_target_decision_balloons_the_guest(node):
    """Two identical guests keep their memory under isolated sharing
    (it divides what they have by their curves); an operator's ceiling
    on vm-1 makes the optimizer's next decision shrink it, a step at a
    time, by balloon through libvirt."""
    server_id = node.servers['vm-1']
    response = node.memcanal_request(
        'PATCH', '/instances/%s' % server_id,
        json={'ceiling_bytes': CEILING_MB * MiB})
    assert response.status_code == 200, response.text
    decision = approve(node, pending(node, 'memory_targets'))
    print('memory targets', decision['outputs'], decision['actions'])
    resized = [action for action in decision['actions']
               if action['target_bytes'] < FLAVOR_MB * MiB]
    assert resized, decision
    for action in resized:
        assert action['instance_uuid'] == server_id
        assert action['mechanism'] == 'balloon'
        # libvirt sets a balloon in KiB.
        services.wait_for(
            lambda: abs(domain_memory(server_id) - action['target_bytes'])
            < 1024, 60, 'the balloon of %s to reach its target' % server_id)


def console_check(node, server_id, seconds=120):
    """Ask the guest to check its data (a line on its serial console, the
    pty nova gave it) and read its verdict there. QEMU reads the pty only
    once it notices someone has it open: the line is sent again every
    few seconds until the guest answers."""
    xml = subprocess.run(['virsh', '-c', 'qemu:///system', 'dumpxml',
                          server_id], capture_output=True, text=True,
                         check=True).stdout
    pty = ElementTree.fromstring(xml).find(
        "devices/serial[@type='pty']/source").get('path')
    descriptor = os.open(pty, os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK)
    seen = b''
    try:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            os.write(descriptor, b'check\n')
            until = time.monotonic() + 5
            while time.monotonic() < until:
                ready, _, _ = select.select([descriptor], [], [], 0.5)
                if ready:
                    seen += os.read(descriptor, 65536)
                verdict = re.search(rb'pagecheck: (ok|BAD)', seen)
                if verdict:
                    assert verdict.group(1) == b'ok', seen[-2000:]
                    return
    finally:
        os.close(descriptor)
    pytest.fail('the guest did not answer on its console: %r' % seen[-500:])


def test_a_pooling_decision_pages_the_guest_to_the_lender(node):
    # compute-2's agent registered its memory server; an operator lends
    # it, and admits both hosts to pooling (API 1.10).
    [server] = services.wait_for(
        lambda: node.memcanal('/memory_servers')['memory_servers'], 30,
        'compute-2\'s memory server')
    response = node.memcanal_request(
        'PATCH', '/memory_servers/%s' % server['uuid'],
        json={'enabled': True})
    assert response.status_code == 200, response.text
    for host in node.memcanal('/hosts')['hosts']:
        response = node.memcanal_request(
            'PATCH', '/hosts/%s' % host['uuid'],
            json={'pooling_admitted': True})
        assert response.status_code == 200, response.text
    # The pager writes each page out sealed, to the lender over TLS: 120
    # MiB took 86 s under TCG on a loaded 2-core machine.
    decision = approve(node, pending(node, 'pooling'), seconds=300)
    print('pooling', decision['outputs'], decision['actions'])
    [action] = decision['actions']
    server_id = action['instance_uuid']
    assert server_id in node.servers.values()

    def paged():
        instance = node.memcanal('/instances/%s' % server_id)
        return instance['paged_bytes'] and instance
    instance = services.wait_for(paged, 60, '%s paged' % server_id)
    print('paged', instance)
    with memserver.connect_admin(str(node.directory / 'memserver.admin')
                                 ) as admin:
        held = admin.stat()
    print('the lender holds', held)
    console_check(node, server_id)


def test_nova_deletes_the_guests_and_memcanal_forgets_them(node):
    for name, server_id in list(node.servers.items()):
        node.delete(server_id)
        del node.servers[name]

        def forgotten():
            response = node.memcanal_request(
                'GET', '/instances/%s' % server_id)
            return response.status_code == 404 or response.json().get(
                'deleted_at')
        services.wait_for(forgotten, 60, 'memcanal to forget %s' % name)
    # Their pagers went with their QEMUs.
    services.wait_for(lambda: not subprocess.run(
        ['pgrep', '-f', 'memcanal-pager'], capture_output=True).stdout,
        30, 'the pagers to exit')
