import os
import uuid

import pytest

from memcanal.agent import collector
from memcanal.agent import driver
from memcanal.agent.drivers import memtrace
from memcanal.agent.drivers import qemu
from memcanal import exception
from memcanal.tests.unit.agent import fake_memtrace

UUID = '1f2e3d4c-5b6a-4978-8a9b-0c1d2e3f4a5b'
MiB = 2 ** 20


@pytest.fixture
def hypervisor(conf, short_tmp_path):
    conf.set_override('state_path', short_tmp_path)
    hypervisor = driver.load('qemu', conf, 'compute-1')
    yield hypervisor
    hypervisor.stop()


@pytest.fixture
def plugin(hypervisor):
    """A traced guest appears in the socket directory."""
    return fake_memtrace.FakePlugin(hypervisor.socket_path(UUID), UUID, 512)


def test_attaches_to_the_plugins_in_its_socket_directory(hypervisor, plugin):
    assert hypervisor.socket_dir.endswith('memtrace')
    instances = hypervisor.list_instances()
    assert [(i.uuid, i.allocated_bytes, i.project_id) for i in instances] \
        == [(UUID, 512 * MiB, 'memcanal')]
    # Attached once, however often it is listed.
    assert len(hypervisor.list_instances()) == 1


def test_a_plugin_without_uuid_is_named_by_its_socket(hypervisor):
    fake_memtrace.FakePlugin(
        os.path.join(hypervisor.socket_dir, 'vm-7.sock'), '')
    assert [i.uuid for i in hypervisor.list_instances()] == ['vm-7']


def test_collect_hands_over_the_logs_and_this_intervals_stats(hypervisor,
                                                              plugin):
    hypervisor.list_instances()
    plugin.send(fake_memtrace.record(memtrace.PRL, [1, 2, 3, 4]))
    plugin.send(fake_memtrace.record(memtrace.PML, [5, 6, 7, 8]))
    plugin.partial = [9]
    plugin.counters.update(references=100, prl_events=3, prl_logged=13,
                           prl_missed=2, prl_handler_ns=900, pml_events=1,
                           pml_logged=5, pml_vm_ns=300)
    sample = hypervisor.collect(UUID)
    logs = sample.logs
    assert sample.trace is None and sample.page_size == 4096
    assert sample.guest_stats == {'references': 100.0}
    assert logs.prl_gpas.tolist() == [1, 2, 3, 4]
    assert logs.pml_gpas.tolist() == [5, 6, 7, 8]
    assert logs.dirty_log.flush().tolist() == [9]
    assert logs.dirty_log.flush().tolist() == []
    assert (logs.stats['prl'].events, logs.stats['prl'].missed,
            logs.stats['prl'].vm_cpu_ns) == (3, 2, 0)
    assert logs.stats['pml'].vm_cpu_ns == 300
    # The next interval's stats are the counters' growth since this one.
    plugin.counters.update(prl_events=5, prl_missed=2)
    stats = hypervisor.collect(UUID).logs.stats
    assert (stats['prl'].events, stats['prl'].missed) == (2, 0)


def test_a_new_dirty_epoch_goes_to_the_plugin(hypervisor, plugin):
    hypervisor.list_instances()
    hypervisor.collect(UUID).logs.dirty_log.clear_dirty()
    hypervisor.collect(UUID)
    assert plugin.commands == ['S', 'C', 'S']


def test_a_guest_that_powered_off_leaves_after_its_last_logs(hypervisor,
                                                             plugin):
    hypervisor.list_instances()
    plugin.send(fake_memtrace.record(memtrace.PRL, [1, 1, 1, 1]))
    plugin.exit()
    assert hypervisor.collect(UUID).logs.prl_gpas.tolist() == [1, 1, 1, 1]
    assert hypervisor.list_instances() == []


def test_a_plugin_that_breaks_is_detached(hypervisor, plugin):
    hypervisor.list_instances()
    plugin.send(b'garbage!' * 5)
    sample = hypervisor.collect(UUID)
    assert sample.logs is None and sample.trace is None
    assert hypervisor.list_instances() == []


def test_the_agent_estimates_from_delivered_logs(conf, hypervisor, plugin):
    """The collector runs real logs through the same handlers and
    estimators as emulated ones; PML's converged round starts a new dirty
    epoch in the plugin."""
    conf.set_override('prl_tau', 2, 'estimation')
    instance = hypervisor.list_instances()[0]
    estimators = None
    for _ in range(4):
        plugin.send(fake_memtrace.record(memtrace.PRL, [10, 11, 10, 11]))
        sample = hypervisor.collect(UUID)
        estimators = estimators or collector.InstanceCollector(
            conf, UUID, instance.allocated_bytes, sample.page_size)
        summary = estimators.collect(sample)
    assert summary['wss']['prl'] == 2 * 4096
    assert summary['wss']['pml'] == 0
    assert 'esx' not in summary['wss']
    assert summary['logs']['prl']['events'] == 0
    assert 'C' in plugin.commands


def test_unknown_instance_and_resizes(hypervisor, plugin):
    with pytest.raises(exception.InstanceNotFound):
        hypervisor.collect('no-such-guest')
    hypervisor.list_instances()
    with pytest.raises(exception.ResizeFailed, match='libvirt'):
        hypervisor.apply_memory_target(UUID, 256 * MiB)


def test_a_socket_directory_too_long_for_unix_sockets(conf):
    conf.set_override('socket_dir', '/' + 'd' * 70, 'qemu')
    with pytest.raises(exception.MemcanalException, match='too long'):
        driver.load('qemu', conf, 'compute-1')


def test_starting_guests_needs_a_plugin_kernel_and_initrd(hypervisor):
    with pytest.raises(exception.MemcanalException, match='plugin, kernel'):
        hypervisor.start_guest(UUID)


def test_guest_command_line():
    plugin = qemu.plugin_argument(
        '/p/memtrace.so', mode='both', socket='/s/g.sock', uuid=UUID,
        memory_mb=256, log_entries=512, tlb_entries=64, handler_base_ns=1000,
        ring_logs=2048)
    assert plugin.split(',') == [
        '/p/memtrace.so', 'mode=both', 'socket=/s/g.sock', 'uuid=' + UUID,
        'memory_mb=256', 'log_entries=512', 'tlb_entries=64',
        'handler_base_ns=1000', 'ring_logs=2048']
    command = qemu.guest_command('qemu-system-x86_64', '/k', '/i', 'quiet',
                                 256, 2, UUID, '/c', plugin)
    assert command[command.index('-plugin') + 1] == plugin
    assert command[command.index('-serial') + 1] == 'file:/c'
    assert ['-accel', 'tcg'] == command[3:5]
    assert '-plugin' not in qemu.guest_command(
        'qemu-system-x86_64', '/k', '/i', '', 256, 1, UUID, '/c')


def test_a_restarted_agent_attaches_to_the_guests_it_started(
        conf, short_tmp_path):
    """Guests started by an earlier agent run on: they are attached to,
    not started again (which would need a kernel)."""
    conf.set_override('state_path', short_tmp_path)
    conf.set_override('instances', 1, 'qemu')
    os.makedirs(os.path.join(short_tmp_path, 'memtrace'))
    started = str(uuid.uuid5(uuid.NAMESPACE_DNS, 'compute-1-0'))
    fake_memtrace.FakePlugin(os.path.join(
        short_tmp_path, 'memtrace', started + '.sock'), started)
    hypervisor = driver.load('qemu', conf, 'compute-1')
    assert [i.uuid for i in hypervisor.list_instances()] == [started]
    hypervisor.stop()
