"""A real Linux guest traced by memtrace, estimated by the agent.

The test guest (tools/build-test-guest.sh) boots under QEMU TCG with the
memtrace plugin and runs the PRL paper's synthetic application over a
64 MiB array in RRWW order (a phase of reads, then a phase of writes).
The agent, with the qemu driver, builds a report every second from the
logs the plugin delivers, as it would on a compute host. The paper's
Fig. 8 claims, on a real guest: PRL's estimate is within 1 MB of the
working set, and PML misses the read-only phase.
"""

import re
import time

import pytest

from memcanal.agent import driver
from memcanal.agent import manager
from memcanal.rpc import reports
from memcanal.tests.functional import services

pytestmark = pytest.mark.functional

MiB = 2 ** 20
WORKING_SET_MB = 64
PHASE_SECONDS = 8
INSTANCE = '6a0f1e4c-7d4b-4b8e-9a56-1f2e3d4c5b6a'
PHASE_LINE = re.compile(r'^wsswork: phase=(\w\w) start$|^wsswork: (done)$',
                        re.MULTILINE)


@pytest.fixture
def qemu_agent(conf, tmp_path):
    guest = services.require_test_guest()
    conf.set_override('state_path', str(tmp_path))
    conf.set_override('report_interval', 1.0, 'agent')
    conf.set_override('prl_stability_window', 2.0, 'estimation')
    conf.set_override('plugin', guest['memtrace.so'], 'qemu')
    conf.set_override('kernel', guest['vmlinux'], 'qemu')
    conf.set_override('initrd', guest['initramfs.gz'], 'qemu')
    conf.set_override('memory_mb', 256, 'qemu')
    hypervisor = driver.load('qemu', conf, 'compute-1')
    agent = manager.AgentManager(conf, 'compute-1', hypervisor)
    agent.host_uuid = '0c6e2f4a-1b3d-4e5f-8a7b-9c0d1e2f3a4b'
    yield agent, hypervisor
    hypervisor.stop()


def phase(console_path):
    """The workload's phase now: None before it starts, RR, WW, done."""
    with open(console_path, errors='replace') as console:
        found = PHASE_LINE.findall(console.read())
    return (found[-1][0] or found[-1][1]) if found else None


def run_guest(agent, hypervisor, conf, order):
    """Report every second until the guest powers off; each interval's
    phase (at its end), instance sample and estimator round counts."""
    hypervisor.start_guest(INSTANCE, append='memcanal.workload=%s:%d:%d' % (
        order, WORKING_SET_MB, PHASE_SECONDS))
    console = hypervisor.console_path(INSTANCE)
    intervals = []
    deadline = time.monotonic() + 180
    while hypervisor.list_instances():
        assert time.monotonic() < deadline, 'the guest did not power off'
        started = time.monotonic()
        report = agent.build_report()
        reports.validate_report(report, conf.service.max_mrc_points,
                                conf.service.max_instances_per_report)
        estimators = agent._collectors[INSTANCE].observer
        intervals.append(dict(
            phase=phase(console), sample=report['instances'][0],
            prl_rounds=estimators.prl.rounds,
            pml_rounds=estimators.pml.rounds))
        time.sleep(max(0.0, 1.0 - (time.monotonic() - started)))
    return intervals


def rounds_within(intervals, estimator, phases):
    """The estimates of ``estimator``'s rounds that began and ended while
    the workload was in ``phases``. A round begins at the end of the
    interval where the previous one converged (its buffer emptied)."""
    key = estimator + '_rounds'
    converged = [index for index, interval in enumerate(intervals)
                 if interval[key] > (intervals[index - 1][key] if index
                                     else 0)]
    return [intervals[end]['sample']['wss'][estimator]
            for begin, end in zip(converged, converged[1:])
            if all(interval['phase'] in phases
                   for interval in intervals[begin:end + 1])]


def test_rrww_on_a_real_guest(qemu_agent, conf):
    """Fig. 8: PRL within 1 MB of the working set, PML blind to the read
    phase; Table 2: log-full events and missed GPAs in every report."""
    agent, hypervisor = qemu_agent
    intervals = run_guest(agent, hypervisor, conf, 'RRWW')
    assert intervals[-1]['phase'] == 'done', 'the workload did not finish'
    working_set = WORKING_SET_MB * MiB

    prl = rounds_within(intervals, 'prl', ('RR', 'WW'))
    assert prl, 'no PRL round ran inside the workload'
    for estimate in prl:
        assert abs(estimate - working_set) < MiB, prl

    # Reads set no dirty bit: while the guest only reads, PML sees only
    # the few pages its kernel writes; once it writes, PML sees them all.
    pml_reading = rounds_within(intervals, 'pml', ('RR',))
    assert pml_reading, 'no PML round ran inside the read phase'
    assert max(pml_reading) < working_set / 2, pml_reading
    pml_writing = rounds_within(intervals, 'pml', ('WW',))
    assert pml_writing, 'no PML round ran inside the write phase'
    for estimate in pml_writing:
        assert abs(estimate - working_set) < MiB, pml_writing

    logs = [interval['sample']['logs'] for interval in intervals]
    totals = {log: {key: sum(entry[log][key] for entry in logs)
                    for key in logs[0][log]} for log in ('prl', 'pml')}
    entries = conf.estimation.log_entries
    # Each event is one full log. PRL's handler only takes full logs, so
    # at most one partial log is left; PML's are also flushed at reports.
    assert 0 <= totals['prl']['logged'] - totals['prl']['events'] * entries \
        < entries
    assert totals['pml']['logged'] >= totals['pml']['events'] * entries > 0
    # The workload's 64 MiB pass after pass: PRL logs far more than it.
    assert totals['prl']['logged'] > 10 * working_set // 4096
    # PML's handler runs on the VM's CPU, PRL's never does.
    assert totals['pml']['vm_cpu_ns'] > 0
    assert totals['prl']['vm_cpu_ns'] == 0
