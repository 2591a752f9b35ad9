"""The Xen driver on a fake libxl connection and a fake memcanal-logdirty
(memcanal.tests.unit.agent.fake_logdirty): domains, balloons, each
domain's helper started, stopped, restarted and its lines reported."""

import os
import subprocess
import time
import tomllib
import uuid

import pytest

from memcanal.agent import driver as agent_driver
from memcanal.agent import manager
from memcanal import exception
from memcanal.rpc import reports
from memcanal.tests.unit.agent import fake_logdirty

pytest.importorskip('libvirt', reason='libvirt-python is not installed')

from memcanal.agent.drivers import logdirty_helpers  # noqa: E402
from memcanal.agent.drivers import xen  # noqa: E402

MIB = 2 ** 20
VM = '3b1a6c1e-35c2-4e0c-9d5e-0c6f1f0a9a01'


def wait_for(condition, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, 'timed out'
        time.sleep(0.02)


@pytest.fixture
def helper_dir(tmp_path):
    return str(tmp_path)


@pytest.fixture
def make_driver(conf, helper_dir):
    drivers = []

    def make(lines=(), domains=None, retry=60.0, delay=0.0):
        binary = fake_logdirty.install(helper_dir, lines, delay)
        conf.set_override('logdirty_binary', binary, 'xen')
        conf.set_override('logdirty_interval', 0.5, 'xen')
        conf.set_override('logdirty_retry_interval', retry, 'xen')
        conf.set_override('logdirty_stop_timeout', 5.0, 'xen')
        conf.set_override('report_interval', 2.0, 'agent')
        if domains is None:
            domains = [fake_logdirty.Domain(7, VM, 256 * 1024)]
        made = xen.XenDriver(conf, 'xen-1',
                             fake_logdirty.Connection(domains))
        drivers.append(made)
        return made

    yield make
    for made in drivers:
        made.stop()


def lines_taken(driver, count):
    """Collections until ``count`` intervals were read."""
    samples = []
    wait_for(lambda: samples.append(driver.collect(VM)) or sum(
        int(s.guest_stats['logdirty_intervals']) for s in samples) >= count)
    return samples


def test_domain_0_is_the_hosts_and_its_memory_reserved(make_driver, conf):
    conf.set_override('reserved_host_memory_mb', 256, 'xen')
    driver = make_driver()
    [instance] = driver.list_instances()
    assert instance.uuid == VM
    assert (instance.allocated_bytes, instance.target_bytes) == (
        256 * MIB, None)
    assert instance.project_id == 'unowned'
    info = driver.host_info()
    assert info.memory_total_bytes == 8192 * MIB
    assert info.memory_reserved_bytes == (256 + 768) * MIB
    assert driver.hypervisor_type == 'xen'


def test_a_listed_domain_gets_its_helper_and_its_writes(make_driver,
                                                        helper_dir):
    driver = make_driver([fake_logdirty.interval(0, [[100, 3]]),
                          fake_logdirty.interval(1, [[100, 2], [500, 1]])])
    driver.list_instances()
    wait_for(lambda: fake_logdirty.log_dirty_on(helper_dir) == [7])
    with open(os.path.join(helper_dir, 'calls')) as calls:
        assert calls.read() == '7 0.5 0\n'
    samples = lines_taken(driver, 2)
    intervals = [frames.tolist() for sample in samples
                 for frames in sample.write_log.intervals]
    assert intervals == [[100, 101, 102], [100, 101, 500]]
    assert all(s.write_log.source == 'xen' for s in samples)
    stats = samples[-1].guest_stats
    assert stats['logdirty_running'] == 1.0
    assert stats['logdirty_starts'] == 1.0
    assert stats['memory_bytes'] == 256 * MIB
    assert stats['balloon_actual_bytes'] == 256 * MIB
    assert sum(s.guest_stats['logdirty_frames'] for s in samples) == 6
    assert sum(s.guest_stats['logdirty_cost_ns'] for s in samples) == 1000


def test_bad_lines_are_counted_and_the_helper_read_on(make_driver):
    """A malformed line and frames outside the domain's range cost the
    agent nothing but a count."""
    limit = xen.logdirty.domain_frames(256 * MIB)
    driver = make_driver([
        'not json', '{"interval": 0}',
        fake_logdirty.interval(0, [[1, 2], [limit, 3]], pages=2 * limit),
        '\x00\xff garbage', fake_logdirty.interval(1, [[5, 1]])])
    driver.list_instances()
    samples = lines_taken(driver, 2)
    intervals = [frames.tolist() for sample in samples
                 for frames in sample.write_log.intervals]
    assert intervals == [[1, 2], [5]]
    assert sum(s.guest_stats['logdirty_rejected_lines']
               for s in samples) == 3
    assert sum(s.guest_stats['logdirty_dropped_frames']
               for s in samples) == 3
    assert samples[-1].guest_stats['logdirty_running'] == 1.0


def test_a_domain_that_goes_has_its_log_dirty_turned_off(make_driver,
                                                         helper_dir):
    driver = make_driver()
    driver.list_instances()
    wait_for(lambda: fake_logdirty.log_dirty_on(helper_dir) == [7])
    del driver.connection.domains[7]
    assert driver.list_instances() == []
    # SIGTERM: the helper turned it off before exiting.
    assert fake_logdirty.log_dirty_on(helper_dir) == []


def test_stopping_the_driver_turns_every_log_dirty_off(make_driver,
                                                       helper_dir):
    other = str(uuid.uuid4())
    driver = make_driver(domains=[
        fake_logdirty.Domain(7, VM, 256 * 1024),
        fake_logdirty.Domain(9, other, 1024 * 1024)])
    assert len(driver.list_instances()) == 2
    wait_for(lambda: fake_logdirty.log_dirty_on(helper_dir) == [7, 9])
    driver.stop()
    assert fake_logdirty.log_dirty_on(helper_dir) == []


def test_log_dirty_held_by_another_is_left_alone_and_retried(make_driver,
                                                             helper_dir):
    """A domain already log-dirty (a migration, xl save, a helper a crash
    left) makes the helper's ENABLE fail: memcanal does not turn it off,
    reports the domain without a dirty log and tries again later."""
    open(os.path.join(helper_dir, 'on-7'), 'w').close()
    driver = make_driver([fake_logdirty.interval(0, [[1, 1]])], retry=0.0)
    driver.list_instances()
    helper = driver.helpers._domains[VM].helper
    wait_for(lambda: not helper.running)
    sample = driver.collect(VM)
    assert sample.write_log.intervals == ()
    assert sample.guest_stats['logdirty_running'] == 0.0
    assert 'Invalid argument' in ' '.join(helper.stderr)
    assert fake_logdirty.log_dirty_on(helper_dir) == [7]   # not ours
    # Its holder let go: the next listing starts a helper that takes it.
    os.unlink(os.path.join(helper_dir, 'on-7'))
    driver.list_instances()
    assert driver.helpers._domains[VM].starts == 2
    samples = lines_taken(driver, 1)
    assert samples[-1].guest_stats['logdirty_running'] == 1.0


def test_a_retry_waits_for_its_interval(make_driver, helper_dir):
    open(os.path.join(helper_dir, 'on-7'), 'w').close()
    driver = make_driver(retry=3600.0)
    driver.list_instances()
    helper = driver.helpers._domains[VM].helper
    wait_for(lambda: not helper.running)
    driver.list_instances()
    driver.list_instances()
    assert driver.helpers._domains[VM].starts == 1


def test_a_missing_binary_is_logged_not_raised(make_driver, conf):
    driver = make_driver()
    driver.stop()
    conf.set_override('logdirty_binary', '/nonexistent/memcanal-logdirty',
                      'xen')
    driver.helpers = logdirty_helpers.LogDirtyHelpers(conf.xen, 2.0)
    [instance] = driver.list_instances()
    sample = driver.collect(VM)
    assert sample.guest_stats['logdirty_running'] == 0.0
    assert sample.write_log.intervals == ()


def test_a_rebooted_domain_gets_a_new_helper(make_driver, helper_dir):
    driver = make_driver()
    driver.list_instances()
    wait_for(lambda: fake_logdirty.log_dirty_on(helper_dir) == [7])
    domain = driver.connection.domains.pop(7)
    domain.domid = 12
    driver.connection.domains[12] = domain
    driver.list_instances()
    wait_for(lambda: fake_logdirty.log_dirty_on(helper_dir) == [12])


def test_balloon_resizes_live_and_nothing_else(make_driver):
    driver = make_driver()
    driver.list_instances()
    resize = driver.apply_memory_target(VM, 128 * MIB, 'balloon')
    assert (resize.previous_bytes, resize.target_bytes) == (
        256 * MIB, 128 * MIB)
    domain = driver.connection.domains[7]
    assert domain.calls == [('setMemoryFlags', 128 * 1024,
                             xen.libvirt_driver.libvirt.
                             VIR_DOMAIN_AFFECT_LIVE)]
    [instance] = driver.list_instances()
    assert instance.target_bytes == 128 * MIB
    for mechanism in ('hotplug', 'paging'):
        with pytest.raises(exception.ResizeFailed, match='balloon only'):
            driver.apply_memory_target(VM, 200 * MIB, mechanism)
    with pytest.raises(exception.ResizeFailed, match='boot memory'):
        driver.apply_memory_target(VM, 512 * MIB, 'balloon')


def test_the_agent_reports_the_xen_working_set(make_driver, conf, tmp_path):
    """An agent on this driver sends reports the service accepts, with
    the PML estimator's working set and the write curve from log-dirty
    under xen_logdirty, and no PRL or ESX estimate."""
    lines = [fake_logdirty.interval(i, [[1000, 256]]) for i in range(3)]
    driver = make_driver(lines, delay=0.2)
    conf.set_override('state_path', str(tmp_path))
    agent = manager.AgentManager(conf, 'xen-1', driver)
    agent.host_uuid = str(uuid.uuid4())
    entries = []
    for _ in lines:
        wait_for(lambda: driver.list_instances() and len(
            driver.helpers._domains[VM].helper._pending) >= 1)
        report = agent.build_report()
        reports.validate_report(report, conf.service.max_mrc_points,
                                conf.service.max_instances_per_report)
        entries.append(report['instances'][0])
    assert all(set(entry['wss']) <= {'xen_logdirty'} for entry in entries)
    # 256 frames each interval: no new one in the second report's, the
    # PML estimator's round ends there.
    assert entries[0]['wss'] == {}
    assert entries[-1]['wss'] == {'xen_logdirty': 256 * 4096}
    assert set(entries[-1]['mrc']) == {'xen_logdirty'}
    assert 'logs' not in entries[-1]


def test_the_driver_is_installed_as_xen():
    """[agent] driver = xen loads it (driver.load's entry point group)."""
    path = os.path.join(os.path.dirname(xen.__file__), '..', '..', '..',
                        'pyproject.toml')
    with open(path, 'rb') as file:
        project = tomllib.load(file)
    drivers = project['project']['entry-points'][
        agent_driver.DRIVER_NAMESPACE]
    assert drivers['xen'] == 'memcanal.agent.drivers.xen:XenDriver'


def test_strays_of_an_earlier_agent_are_ended(helper_dir):
    binary = fake_logdirty.install(helper_dir)
    stray = subprocess.Popen([binary, '5', '1', '0'])
    other = subprocess.Popen(['sleep', '30'])
    try:
        wait_for(lambda: fake_logdirty.log_dirty_on(helper_dir) == [5])
        ended = logdirty_helpers.end_strays(binary, 5.0, kill=os.kill)
        assert ended == [stray.pid]
        assert stray.wait(5) == 0
        assert fake_logdirty.log_dirty_on(helper_dir) == []
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()
        if stray.poll() is None:
            stray.kill()
            stray.wait()


def test_a_helper_signalled_by_another_is_started_again_at_once(
        make_driver, helper_dir):
    """SIGTERM from elsewhere (its parent thread's end): log-dirty off,
    exit 0; the next listing starts a new helper without waiting."""
    driver = make_driver(retry=3600.0)
    driver.list_instances()
    wait_for(lambda: fake_logdirty.log_dirty_on(helper_dir) == [7])
    helper = driver.helpers._domains[VM].helper
    helper.process.terminate()
    assert helper.process.wait(5) == 0
    driver.list_instances()
    assert driver.helpers._domains[VM].starts == 2
    wait_for(lambda: fake_logdirty.log_dirty_on(helper_dir) == [7])
