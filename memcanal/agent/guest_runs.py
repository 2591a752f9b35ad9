"""Running the test guest's workload under the agent, for tests and
benchmarks.

The test guest (tools/build-test-guest.sh) runs wsswork, the PRL paper's
synthetic application, and prints its phases and their throughput on
its serial console. ``run_workload`` starts it through the qemu driver
and has the agent build a report every interval until it powers off,
noting each interval's phase, so that estimator rounds can be matched to
what the guest was doing (``rounds_within``).
"""

import os
import re
import subprocess
import time

from memcanal.agent import driver
from memcanal.agent.drivers import qemu
from memcanal.agent import manager
from memcanal.conf import qemu as qemu_conf

PHASE_LINE = re.compile(r'^wsswork: phase=(\w\w) start$|^wsswork: (done)$',
                        re.MULTILINE)
THROUGHPUT_LINE = re.compile(
    r'^wsswork: phase=(\w\w) passes=(\d+) ops=(\d+) ns=(\d+) '
    r'ops_per_us=([\d.]+)', re.MULTILINE)
COUNTERS_LINE = re.compile(r'^memtrace: (.*)$', re.MULTILINE)


GUEST_FILES = ('vmlinux', 'vmlinuz', 'initramfs.gz', 'memtrace.so')
HOST = 'compute-1'
HOST_UUID = '0c6e2f4a-1b3d-4e5f-8a7b-9c0d1e2f3a4b'


def guest_files(directory):
    """The test guest's files in ``directory`` by name, and those missing."""
    files = {name: os.path.abspath(os.path.join(directory, name))
             for name in GUEST_FILES}
    return files, [path for path in files.values()
                   if not os.path.exists(path)]


def traced_agent(conf, guest, state_path, memory_mb=256, interval=1.0,
                 stability_window=1.0):
    """An agent on the qemu driver, set to start the test guest, already
    registered (it builds reports, nothing sends them).

    PRL's hot-page count must not change over ``stability_window``. On a
    real kernel it creeps, a page every other second as kernel pages
    reach tau, so a window of two intervals waits for the creep to pause
    (rounds of 3 to 12 s) where one interval gives a round every two.
    """
    conf.set_override('state_path', state_path)
    conf.set_override('report_interval', interval, 'agent')
    conf.set_override('prl_stability_window', stability_window, 'estimation')
    conf.set_override('plugin', guest['memtrace.so'], 'qemu')
    conf.set_override('kernel', guest['vmlinux'], 'qemu')
    conf.set_override('initrd', guest['initramfs.gz'], 'qemu')
    conf.set_override('memory_mb', memory_mb, 'qemu')
    hypervisor = driver.load('qemu', conf, HOST)
    agent = manager.AgentManager(conf, HOST, hypervisor)
    agent.host_uuid = HOST_UUID
    return agent, hypervisor


def workload_argument(order, size_mb, phase_seconds):
    return 'memcanal.workload=%s:%d:%g' % (order, size_mb, phase_seconds)


def _console(path):
    with open(path, errors='replace') as console:
        return console.read()


def phase(console_path):
    """The workload's phase now: None before it starts, then RR, WW or RW,
    and 'done'."""
    found = PHASE_LINE.findall(_console(console_path))
    return (found[-1][0] or found[-1][1]) if found else None


def throughputs(console_text):
    """Each finished phase's name and operations per microsecond."""
    return [(name, float(rate)) for name, _passes, _ops, _ns, rate
            in THROUGHPUT_LINE.findall(console_text)]


def run_workload(agent, hypervisor, instance_uuid, order, size_mb,
                 phase_seconds, interval=1.0, timeout=300.0):
    """Start the guest on ``order`` over ``size_mb`` and report every
    ``interval`` until it powers off. Returns one entry per report: the
    phase at its end, the instance's sample, the estimators' round
    counts, and the seconds the interval lasted."""
    hypervisor.start_guest(instance_uuid, append=workload_argument(
        order, size_mb, phase_seconds))
    console = hypervisor.console_path(instance_uuid)
    intervals = []
    deadline = time.monotonic() + timeout
    last = time.monotonic()
    while hypervisor.list_instances():
        if time.monotonic() > deadline:
            raise TimeoutError('the guest did not power off in %.0fs'
                               % timeout)
        report = agent.build_report()
        now = time.monotonic()
        estimators = agent.estimators(instance_uuid)
        intervals.append(dict(
            phase=phase(console), sample=report['instances'][0],
            report=report, prl_rounds=estimators.prl.rounds,
            pml_rounds=estimators.pml.rounds, seconds=now - last))
        last = now
        time.sleep(max(0.0, interval - (time.monotonic() - now)))
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


def log_totals(intervals, phases=None):
    """The reports' ``logs`` summed by log, over the intervals in
    ``phases`` (all if None), with the seconds they lasted."""
    chosen = [interval for interval in intervals
              if phases is None or interval['phase'] in phases]
    totals = {}
    for interval in chosen:
        for log, stats in interval['sample'].get('logs', {}).items():
            for key, value in stats.items():
                totals.setdefault(log, {}).setdefault(key, 0)
                totals[log][key] += value
    totals['seconds'] = sum(interval['seconds'] for interval in chosen)
    return totals


def run_unattended(binary, guest, order, size_mb, phase_seconds, console,
                   plugin_options=None, memory_mb=256, timeout=300.0,
                   memfd=False):
    """Run the workload with no agent: without the plugin (None), or with
    it and ``plugin_options`` but no consumer; the RAM in a shared memfd
    if ``memfd``. Returns the console's text and the plugin's counters,
    which it prints when QEMU exits."""
    plugin = None
    if plugin_options is not None:
        plugin = qemu.plugin_argument(guest['memtrace.so'], **plugin_options)
    command = qemu.guest_command(
        binary, guest['vmlinux'], guest['initramfs.gz'],
        '%s %s' % (qemu_conf.GUEST_APPEND, workload_argument(
            order, size_mb, phase_seconds)),
        memory_mb, 1, '00000000-0000-0000-0000-000000000000', console,
        plugin, memfd=memfd)
    finished = subprocess.run(command, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True,
                              timeout=timeout, check=True)
    lines = COUNTERS_LINE.findall(finished.stderr)
    counters = {key: int(value) for key, value in (
        pair.split('=') for pair in lines[-1].split())} if lines else {}
    return _console(console), counters
