import ctypes.util
import json
import os
import uuid

import pytest

from memcanal.agent import collector
from memcanal.agent import driver
from memcanal.agent.drivers import memtrace
from memcanal.agent.drivers import paged
from memcanal.agent.drivers import qemu
from memcanal.agent import paging
from memcanal import exception
from memcanal.tests.unit.agent import fake_memtrace
from memcanal.tests.unit.agent import fake_pager

UUID = '1f2e3d4c-5b6a-4978-8a9b-0c1d2e3f4a5b'
MiB = 2 ** 20
TOKENS = {fake_pager.STORE: fake_pager.lease_token(UUID)}


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


def test_starting_guests_needs_a_kernel_and_something_to_observe(
        conf, hypervisor):
    with pytest.raises(exception.MemcanalException, match='kernel and'):
        hypervisor.start_guest(UUID)
    conf.set_override('kernel', '/k', 'qemu')
    conf.set_override('initrd', '/i', 'qemu')
    with pytest.raises(exception.MemcanalException, match='neither traced'):
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


def test_guest_command_puts_pageable_ram_in_a_shared_memfd():
    command = qemu.guest_command('qemu', 'k', 'i', '', 256, 1, UUID, 'c',
                                 memfd=True)
    assert 'memory-backend-memfd,id=mem,size=256M,share=on' in command
    assert command[command.index('memory-backend=mem') - 1] == '-machine'


# -- guests with a pager ---------------------------------------------------

PAGE = paging.PAGE
GUEST_MB = 16


@pytest.fixture
def pageable(conf, short_tmp_path):
    """The qemu driver set to start pageable guests of GUEST_MB, QEMU and
    memcanal-pager being fakes (fake_pager), sampled at rate 0.5; no
    plugin."""
    pager_binary, qemu_binary = fake_pager.write(short_tmp_path)
    for name, value, group in (
            ('state_path', short_tmp_path, None),
            ('binary', qemu_binary, 'qemu'),
            ('kernel', '/k', 'qemu'),
            ('initrd', '/i', 'qemu'),
            ('memory_mb', GUEST_MB, 'qemu'),
            ('paging', True, 'qemu'),
            ('binary', pager_binary, 'pager'),
            ('shim', ctypes.util.find_library('c'), 'pager'),
            ('timeout', 10.0, 'pager'),
            ('cold_after', 0.2, 'pager'),
            ('report_interval', 0.1, 'agent'),
            ('rate', 0.5, 'sampling'),
            ('max_rate', 0.5, 'sampling'),
            ('tls_ca_file', fake_pager.CA, 'pooling')):
        conf.set_override(name, value, group)
    drivers = []

    def make():
        drivers.append(driver.load('qemu', conf, 'compute-1'))
        return drivers[-1]
    yield make
    for hypervisor in drivers:
        hypervisor.stop()


def inject(hypervisor, intervals=(), faults=()):
    hypervisor.guests[UUID].vm_pager.client.command('inject ' + json.dumps(
        {'intervals': list(intervals), 'faults': list(faults)}))


def interval(touched, full=False):
    return {'index': 0, 'start_ns': 0, 'end_ns': 10 ** 9, 'full': full,
            'touched': [first for page in touched for first in (page, 1)],
            'written': []}


def test_a_guest_without_memtrace_is_sampled_and_paged(pageable):
    hypervisor = pageable()
    hypervisor.start_guest(UUID, stores=[fake_pager.STORE],
                           lease_tokens=TOKENS)
    guest = hypervisor.guests[UUID]
    assert guest.connection is None
    stats = guest.vm_pager.client.command('stats')
    args = stats['args']
    assert args[:2] == ['--socket', hypervisor.pager_socket_path(UUID)]
    first = args.index('--store')
    assert args[first:first + 3] == [
        '--store', fake_pager.STORE, '--store-token-file']
    assert stats['tokens'][0] == TOKENS[fake_pager.STORE]
    assert args[args.index('--sample-rate') + 1] == '0.5'
    [info] = hypervisor.list_instances()
    assert (info.uuid, info.allocated_bytes) == (UUID, GUEST_MB * MiB)

    inject(hypervisor, [interval([5, 6]), interval(range(10), full=True)])
    sample = hypervisor.collect(UUID)
    assert sample.logs is None and sample.paging_trace is None
    assert [i.touched.tolist() for i in sample.accesses.intervals] == [
        [5, 6], list(range(10))]
    assert [i.full for i in sample.accesses.intervals] == [False, True]
    resize = hypervisor.apply_memory_target(UUID, 0, mechanism='paging')
    assert (resize.mechanism, resize.target_bytes) == ('paging', 0)
    with pytest.raises(exception.ResizeFailed, match='only pages'):
        hypervisor.apply_memory_target(UUID, 0, mechanism='balloon')


def test_memtrace_and_sampling_are_both_reported(pageable, conf):
    """With the plugin too, a Sample carries both (the benchmark
    compares them); PRL's guest-physical frames reach the detector as
    page indexes."""
    conf.set_override('plugin', '/memtrace.so', 'qemu')
    hypervisor = pageable()
    os.makedirs(hypervisor.socket_dir, exist_ok=True)
    plugin = fake_memtrace.FakePlugin(hypervisor.socket_path(UUID), UUID,
                                      GUEST_MB)
    hypervisor.start_guest(UUID)
    plugin.send(fake_memtrace.record(memtrace.PRL, [100, 100, 101]))
    inject(hypervisor, [interval([7])])
    sample = hypervisor.collect(UUID)
    assert sample.logs.prl_gpas.tolist() == [100, 100, 101]
    assert sample.accesses.intervals[0].touched.tolist() == [7]
    detector = hypervisor.guests[UUID].pager.detector
    assert detector.frequency([100, 101, 102]).tolist() == [1, 1, 0]


def test_a_restarted_agent_finds_the_pagers_of_running_guests(pageable):
    first = pageable()
    first.start_guest(UUID)
    guest = first.guests[UUID]
    pid, qemu_process = guest.vm_pager.process.pid, guest.process
    # An agent that crashed: nothing of it is stopped.
    guest.vm_pager.close()
    second = pageable()
    adopted = second.guests[UUID]
    assert (adopted.process, adopted.vm_pager.process.pid) == (None, pid)
    inject(second, [interval([3])])
    assert second.collect(UUID).accesses.intervals[0].touched.tolist() == [3]
    # This agent did not start the guest: stopping it leaves it running.
    second.stop()
    assert qemu_process.poll() is None and adopted.vm_pager.alive()
    first.guests.clear()
    qemu_process.kill()
    qemu_process.wait()
    adopted.vm_pager.process.wait(10)
    assert not adopted.vm_pager.alive()
    # Its pager went with it; the next agent forgets it.
    assert pageable().guests == {}
    assert paged.records(second.conf) == []


def test_a_guest_that_exits_leaves_with_its_pager(pageable):
    hypervisor = pageable()
    hypervisor.start_guest(UUID)
    guest = hypervisor.guests[UUID]
    key = paged.pager_file(hypervisor.conf, UUID, '.key')
    assert os.path.exists(key)
    guest.process.kill()
    guest.process.wait()
    assert hypervisor.list_instances() == []
    assert not guest.vm_pager.alive()
    assert paged.records(hypervisor.conf) == []
    assert not os.path.exists(key)


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


def test_a_dead_pager_is_replaced_by_one_taking_over(pageable):
    """The shim offers its RAM again on the pager's socket, where the
    new pager (same state, key, stores and lease tokens) listens."""
    hypervisor = pageable()
    hypervisor.start_guest(UUID, stores=[fake_pager.STORE],
                           lease_tokens=TOKENS)
    guest = hypervisor.guests[UUID]
    first = guest.vm_pager
    args = first.client.command('stats')['args']
    assert '--key-file' in args and '--store-token-file' in args
    first.process.kill()
    [info] = hypervisor.list_instances()
    assert guest.vm_pager is not first and guest.vm_pager.alive()
    assert guest.vm_pager.client.command('stats')['args'] == args
    hello = guest.vm_pager.client.command('hello')
    while not hello['attached']:
        hello = guest.vm_pager.client.command('hello')
    assert hello['adopted'] and hello['pid'] == guest.process.pid
    inject(hypervisor, [interval([4])])
    assert hypervisor.collect(UUID).accesses.intervals[0].touched.tolist() \
        == [4]
