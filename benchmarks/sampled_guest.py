"""The test guest under QEMU TCG running a shell command of one's own,
its RAM handed to a memcanal-pager driven from the benchmark, traced by
memtrace or not: what benchmarks/sampling_accuracy.py,
benchmarks/sampling_cost.py and benchmarks/corpus_cost.py boot, with
what they measure it by.

The command runs from an /init of its own (rdinit=/sampling-run, an
archive appended to the test guest's initramfs), between two console
lines the benchmark waits for, ``START`` and ``DONE``. The pager samples
with ``--sample-interval-ms 0``: its intervals end only when the
benchmark sends ``tick``, so that they end when the benchmark looks.
"""

import gzip
import os
import pathlib
import statistics
import subprocess
import sys
import time
import types

from oslo_config import cfg

from memcanal.agent import adaptive
from memcanal.agent.drivers import memtrace
from memcanal.agent import guest_runs
from memcanal.agent.drivers import qemu
from memcanal.agent import pager_client
from memcanal.conf import qemu as qemu_conf
from memcanal.conf import sampling as sampling_conf
from memcanal.estimation import mrc
from memcanal.estimation import sampling
from memcanal.tests.functional import test_guest_paging

GUEST_MB = 256
GUEST_PAGES = GUEST_MB * 2 ** 20 // 4096
INSTANCE = '00000000-0000-0000-0000-000000000024'
START, DONE = 'sampling-run: start', 'sampling-run: done'
BOOT_TIMEOUT = 180.0
MiB = 2 ** 20

# The guest's /init for these runs (rdinit=/sampling-run): the command
# is a file of its own, so that any shell line goes through unquoted.
# It waits a little before powering off, so that the host closes the
# last interval while the guest still runs.
RUN_SCRIPT = b'''#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /tmp
mount -t tmpfs tmpfs /tmp
echo "%s"
sh /sampling-command
echo "%s rc=$?"
sleep 2
poweroff -f
''' % (START.encode(), DONE.encode())


def guest_or_exit(guest_dir):
    """The test guest's files, as root can run them; exits saying what
    is missing otherwise."""
    guest, missing = guest_runs.guest_files(guest_dir)
    if missing:
        sys.exit('missing %s: run tools/build-test-guest.sh'
                 % ', '.join(missing))
    if os.geteuid() != 0:
        sys.exit('needs root: userfaultfd on shared memory')
    return guest


def run_initrd(guest, command, path):
    """The test guest's initramfs with /sampling-run running ``command``
    appended, written to ``path``."""
    pathlib.Path(path).write_bytes(
        pathlib.Path(guest['initramfs.gz']).read_bytes() + gzip.compress(
            test_guest_paging.newc({'sampling-run': RUN_SCRIPT,
                                    'sampling-command':
                                        command.encode() + b'\n'})))
    return path


class SampledGuest:
    """The test guest under QEMU TCG running ``command``, its RAM in a
    shared memfd; with ``pager_options``, QEMU's shim hands the RAM to a
    memcanal-pager of its own, driven through its control socket; with
    ``plugin_options``, memtrace traces it and this process consumes the
    logs."""

    def __init__(self, build, guest, scratch, command, pager_options=None,
                 plugin_options=None, memory_mb=GUEST_MB):
        self.ram_bytes = memory_mb * MiB
        self.console_path = os.path.join(scratch, 'console')
        pathlib.Path(self.console_path).write_text('')
        self._read = 0
        self.qemu = self.pager = self.client = self.memtrace = None
        trace_socket = os.path.join(scratch, 'memtrace.sock')
        plugin = None if plugin_options is None else qemu.plugin_argument(
            guest['memtrace.so'], socket=trace_socket, **plugin_options)
        command_line = qemu.guest_command(
            'qemu-system-x86_64', guest['vmlinux'],
            run_initrd(guest, command, os.path.join(scratch, 'initrd.gz')),
            qemu_conf.GUEST_APPEND + ' rdinit=/sampling-run', memory_mb, 1,
            INSTANCE, self.console_path, plugin, memfd=True)
        env = None
        try:
            if pager_options is not None:
                env = self._start_pager(build, scratch, pager_options)
            with open(os.path.join(scratch, 'qemu.log'), 'wb') as log:
                self.qemu = subprocess.Popen(
                    command_line, stdin=subprocess.DEVNULL, stdout=log,
                    stderr=log, env=env)
            if self.client is not None:
                self._wait_attached()
            if plugin is not None:
                self.memtrace = memtrace.Connection(trace_socket)
        except BaseException:
            self.stop()
            raise

    def _start_pager(self, build, scratch, options):
        socket = os.path.join(scratch, 'pager.sock')
        control = os.path.join(scratch, 'pager.ctl')
        log = os.path.join(scratch, 'pager.log')
        self.pager = pager_client.launch(
            str(pathlib.Path(build) / 'memcanal-pager'),
            ['--socket', socket, '--control', control, *options], log)
        self.client = pager_client.PagerClient(control, self.pager, log)
        self.client.command('hello')          # it listens on both
        return dict(os.environ, MEMCANAL_PAGER_SOCKET=socket,
                    LD_PRELOAD=str(pathlib.Path(build)
                                   / 'libmemcanal-uffd.so'))

    def _wait_attached(self, timeout=60.0):
        deadline = time.monotonic() + timeout
        while not self.client.command('hello').get('attached'):
            if self.qemu.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError('QEMU did not hand its RAM to the pager')
            time.sleep(0.02)

    def console(self):
        return pathlib.Path(self.console_path).read_text(errors='replace')

    def new_lines(self):
        """The console's complete lines since the last call."""
        text = self.console()
        end = text.rfind('\n', self._read) + 1
        if end <= self._read:
            return []
        lines, self._read = text[self._read:end], end
        return lines.splitlines()

    def wait_for(self, marker, timeout):
        """Wait up to ``timeout`` for ``marker`` on the console; whether
        it came. Raises if QEMU exited first."""
        deadline = time.monotonic() + timeout
        while marker not in self.console():
            if self.qemu.poll() is not None:
                raise RuntimeError('QEMU exited before %r: %s' % (
                    marker, self.console()[-2000:]))
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.01)
        return True

    def stop(self):
        """Wait for the guest to power off (kill it after 30 s); its
        pager exits with it."""
        if self.qemu is not None:
            try:
                self.qemu.wait(30)
            except subprocess.TimeoutExpired:
                self.qemu.kill()
                self.qemu.wait(10)
        if self.memtrace is not None:
            self.memtrace.close()
        if self.client is not None:
            self.client.close()
        if self.pager is not None:
            self.pager.wait(10)


def pager_options(rate, salt=mrc.DEFAULT_SALT, full_pass_every=0):
    """A pager sampling at ``rate``, its intervals ended by ``tick``."""
    return ['--sample-rate', repr(rate), '--sample-salt', str(salt),
            '--sample-interval-ms', '0',
            '--full-pass-every', str(full_pass_every)]


# What a boot costs: its processes' CPU, the figures over rounds.

def cpu_seconds(pid):
    """User and system time of process ``pid`` so far."""
    with open('/proc/%d/stat' % pid) as stat:
        fields = stat.read().rsplit(')', 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')


def thread_times(pid):
    """{thread id: (seconds running, seconds waiting for a CPU)} of
    process ``pid`` (/proc/PID/task/TID/schedstat)."""
    times = {}
    for tid in os.listdir('/proc/%d/task' % pid):
        try:
            with open('/proc/%d/task/%s/schedstat' % (pid, tid)) as stat:
                run, wait = stat.read().split()[:2]
        except OSError:                  # the thread ended
            continue
        times[int(tid)] = (int(run) / 1e9, int(wait) / 1e9)
    return times


def vcpu_times(before, after):
    """(run, wait) seconds between two thread_times of QEMU of its vCPU
    thread: the one that ran most (a TCG guest of one vCPU)."""
    deltas = [(after[tid][0] - before[tid][0], after[tid][1]
               - before[tid][1]) for tid in after if tid in before]
    return max(deltas)


def spread(values):
    """{median, range} of per-round figures."""
    values = [value for value in values if value is not None]
    if not values:
        return None
    return {'median': statistics.median(values),
            'range': [min(values), max(values)]}


def percent(figure):
    """A spread of shares as percent: median (low..high)."""
    if figure is None:
        return '-'
    low, high = figure['range']
    return '%.2f (%.2f..%.2f)' % (100 * figure['median'], 100 * low,
                                  100 * high)


def sampling_options(overrides=None):
    """The [sampling] options at their defaults but ``overrides`` (by
    name)."""
    conf = cfg.ConfigOpts()
    sampling_conf.register_opts(conf)
    conf([], default_config_files=[])
    for name, value in (overrides or {}).items():
        conf.set_override(name, value, 'sampling')
    return conf.sampling


class AutoRate:
    """The agent's adaptive rate on a benchmark's pager: every interval
    the pager closes feeds a SampledAccesses as the agent's collector's
    does, memcanal.agent.adaptive plans the next rate from it with
    [sampling]'s defaults (but ``overrides``, [sampling] options by
    name), and a change goes to the pager as ``resample``, which takes it
    from its next interval. ``estimator``: SampledAccesses' options."""

    def __init__(self, pages, interval_s, overrides=None, **estimator):
        options = sampling_options(overrides)
        self.rate = adaptive.initial_rate(options)
        self.rates = adaptive.SamplingRates(options)
        self.view = types.SimpleNamespace(sampled=sampling.SampledAccesses(
            pages, self.rate, interval_s=interval_s, **estimator))

    def step(self, client, interval):
        """Feed the pager's ``interval`` (a driver.AccessInterval); send
        the next rate if it changes."""
        self.view.sampled.add_interval(
            interval.touched, interval.written, interval.full,
            interval.seconds, interval.rate, interval.salt)
        change = self.rates.plan({'guest': self.view}).get('guest')
        if change is not None:
            client.command('resample %r %d' % change)
