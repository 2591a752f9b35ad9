"""A real Xen host for functional tests: Xen 4.17 and a Linux dom0
nested in QEMU TCG, booted from what tools/build-xen.sh builds.

There is no Xen on the machines tests run on, nor hardware
virtualization; Xen runs as QEMU TCG's guest, with the CPU flags the
research note (../shared/research/xen.md) found it needs. The host runs
commands in dom0 through a virtio-serial port (a Unix socket here, a
shell reading the port there): dom0 is a PV guest and drives QEMU's PCI
devices, virtio included, as a native kernel would. Guests' consoles are
logged by xenconsoled in dom0 and read back through the same port.

dom0 also gets QEMU's user network (the host is HOST_ADDRESS from dom0,
its loopback services reached there, RabbitMQ's included) and the
host's root file system, shared read-only (virtfs) and laid out at
/host in dom0 with what the host lacks to drive Xen over it
(hypervisor-patches/xen/dom0-hostroot): the host's libvirtd with
libvirt's Xen driver, virsh, and the project's venv run there
(``in_host_root``, ``start_libvirtd``, ``virsh``, ``python_command``),
against dom0's Xen toolstack.

    python -m memcanal.tests.functional.xen_host [--memory-mb 256] ...

boots it once, runs memcanal-writer in a PVH domU under
memcanal-logdirty, and prints a summary per interval (doc/xen.md);
with --libvirt, times libvirt's Xen driver and the project's Python in
dom0 instead (measure_libvirt).
"""

import argparse
import json
import os
import shlex
import socket
import subprocess
import sys
import tempfile
import time
import uuid

PAGE = 4096
XEN_DIR = os.environ.get('MEMCANAL_XEN_DIR', os.path.join(
    os.environ.get('XDG_CACHE_HOME') or os.path.expanduser('~/.cache'),
    'memcanal', 'xen'))
ARTEFACTS = ('xen.elf', 'vmlinuz', 'dom0.cpio.gz')
# QEMU's CPU for Xen: qemu64 (AMD) with SVM and nested paging (HAP),
# which PVH guests and their log-dirty need, and the SSE levels numpy's
# wheels want; nothing newer. Under ``max`` (less SMAP and RDTSCP) with
# two CPUs, processes in dom0 died at random whenever a PVH guest ran
# beside it (their TLS read wrong: libvirtd and CPython in glibc's
# malloc, a static program in __ctype_init) and PVH guests' kernels
# panicked (kernel and user GS bases alike in error_entry), under
# multi-threaded and single-threaded TCG alike; with one CPU, more
# rarely. With this CPU and one CPU, none of it in any run since
# (doc/xen.md, "Processes dying in dom0"). MEMCANAL_XEN_CPU and
# MEMCANAL_XEN_CPUS set others, to try them.
CPU = os.environ.get('MEMCANAL_XEN_CPU', 'qemu64,+svm,+npt,+ssse3,+sse4.1,'
                     '+sse4.2,+popcnt,+cx16')
CPUS = int(os.environ.get('MEMCANAL_XEN_CPUS', '1'))
XEN_ARGS = 'console=com1 com1=115200,8n1 dom0_mem=%dM,max:%dM noreboot'
DOM0_ARGS = 'console=hvc0 earlyprintk=xen'
LOGDIRTY = '/usr/lib/xen-4.17/bin/memcanal-logdirty'
# libvirt's Xen driver, as dom0's /host sees it.
LIBVIRT_URI = 'xen:///system'
LIBXL_DRIVER = ('/usr/lib/x86_64-linux-gnu/libvirt/connection-driver/'
                'libvirt_driver_libxl.so')
# The host as dom0 sees it on QEMU's user network: a connection to
# HOST_ADDRESS:PORT reaches the host's 127.0.0.1:PORT.
HOST_ADDRESS = '10.0.2.2'


class XenError(Exception):
    """A dom0 command failed, or Xen did not come up in time."""


def absent_artefacts(xen_dir=XEN_DIR):
    """The artefacts tools/build-xen.sh makes that ``xen_dir`` lacks,
    and qemu-system-x86_64 if it is not installed."""
    absent = [name for name in ARTEFACTS
              if not os.path.exists(os.path.join(xen_dir, name))]
    if subprocess.run(['sh', '-c', 'command -v qemu-system-x86_64'],
                      capture_output=True).returncode:
        absent.append('qemu-system-x86_64')
    return absent


def parse_runs(text):
    """The frame numbers of a JSON list of [first, count] runs."""
    frames = set()
    for first, count in json.loads(text):
        frames.update(range(first, first + count))
    return frames


def parse_logdirty(output):
    """memcanal-logdirty's intervals, from its output, in order; its
    other lines (errors on stderr) are left out."""
    intervals = []
    for line in output.splitlines():
        if line.startswith('{'):
            interval = json.loads(line)
            interval['frames'] = set()
            for first, count in interval['pfns']:
                interval['frames'].update(range(first, first + count))
            intervals.append(interval)
    return intervals


def parse_writer(console):
    """What memcanal-writer said on a guest's console: its pages' frames
    (``frames``), whether it reached each phase (``writing``, ``idle``,
    ``done``), how many passes it wrote (``passes``) and its longest pass
    in seconds (``longest_s``)."""
    said = {'frames': None, 'writing': False, 'idle': False, 'done': False,
            'passes': None, 'longest_s': None}
    for line in console.splitlines():
        line = line.strip()
        if line.startswith('writer: pages='):
            said['frames'] = parse_runs(line.split('pfns=', 1)[1])
        elif line.startswith('writer: wrote passes='):
            fields = dict(word.split('=') for word in line.split()[2:])
            said['passes'] = int(fields['passes'])
            said['longest_s'] = int(fields['longest_ns']) / 1e9
        elif line in ('writer: writing', 'writer: idle', 'writer: done'):
            said[line.split(': ')[1]] = True
    return said


def parse_dommemstat(output):
    """``virsh dommemstat``'s lines as {name: KiB}."""
    stats = {}
    for line in output.splitlines():
        words = line.split()
        if len(words) == 2 and words[1].isdigit():
            stats[words[0]] = int(words[1])
    return stats


def pvh_domain_xml(name, memory_mb, writer=None):
    """libvirt's XML of a PVH domU like ``XenHost.create_pvh``'s (the
    kernel and initrd dom0 has under /domu, bound into /host)."""
    extra = 'console=hvc0'
    if writer:
        extra += ' memcanal.writer=%d:%d:%d' % tuple(writer)
    return '\n'.join([
        "<domain type='xen'>",
        '  <name>%s</name>' % name,
        "  <memory unit='MiB'>%d</memory>" % memory_mb,
        "  <currentMemory unit='MiB'>%d</currentMemory>" % memory_mb,
        '  <vcpu>1</vcpu>',
        '  <os>',
        "    <type arch='x86_64' machine='xenpvh'>xenpvh</type>",
        '    <kernel>/domu/vmlinuz</kernel>',
        '    <initrd>/domu/domu.cpio.gz</initrd>',
        '    <cmdline>%s</cmdline>' % extra,
        '  </os>',
        '  <on_poweroff>destroy</on_poweroff>',
        '  <on_reboot>destroy</on_reboot>',
        '  <on_crash>destroy</on_crash>',
        '</domain>', ''])


def classify(intervals, written):
    """Each interval against the ``written`` frames: 'all' if every one
    was dirty in it, 'none' if none was, else 'some'; with the dirty
    frames outside the set (what the guest's kernel and the writer's own
    stack wrote), as (kind, extra) pairs."""
    kinds = []
    for interval in intervals:
        hit = len(interval['frames'] & written)
        kind = 'all' if hit == len(written) else 'none' if not hit else 'some'
        kinds.append((kind, len(interval['frames'] - written)))
    return kinds


class XenHost(object):
    """Xen and dom0 in QEMU TCG; ``run`` a shell command in dom0."""

    def __init__(self, xen_dir=XEN_DIR, memory_mb=2048, dom0_mb=768,
                 work_dir=None, host_root=True, forwards=()):
        self.xen_dir = xen_dir
        self.host_root = host_root
        self.forwards = tuple(forwards)
        self.memory_mb = memory_mb
        self.dom0_mb = dom0_mb
        self.work_dir = work_dir or tempfile.mkdtemp(prefix='memcanal-xen-')
        self.serial_log = os.path.join(self.work_dir, 'serial.log')
        self.process = None
        self.sock = None
        self.pending = b''

    def command_line(self, control):
        """QEMU's: Xen as the multiboot kernel, dom0's kernel and
        initramfs its modules (comma-separated), the virtio-serial port
        at Unix socket ``control``."""
        path = lambda name: os.path.join(self.xen_dir, name)  # noqa: E731
        return [
            'nice', '-n', '19', 'qemu-system-x86_64',
            '-machine', 'q35', '-accel', 'tcg', '-cpu', CPU,
            '-smp', str(CPUS),
            '-m', str(self.memory_mb), '-display', 'none', '-no-reboot',
            '-monitor', 'none', '-serial', 'file:%s' % self.serial_log,
            '-device', 'virtio-serial-pci',
            '-chardev', 'socket,id=ctl,path=%s,server=on,wait=off' % control,
            '-device', 'virtserialport,chardev=ctl,name=memcanal',
            '-kernel', path('xen.elf'),
            '-append', XEN_ARGS % (self.dom0_mb, self.dom0_mb),
            '-initrd', '%s %s,%s' % (path('vmlinuz'), DOM0_ARGS,
                                     path('dom0.cpio.gz')),
        ] + self.network_args() + self.host_root_args()

    def network_args(self):
        """QEMU's user network for dom0 (eth0, 10.0.2.15): the host is
        10.0.2.2 from dom0 (HOST_ADDRESS), its loopback services reached
        there; ``forwards``, (host_port, dom0_port) pairs, forward host
        ports on 127.0.0.1 to dom0's."""
        netdev = 'user,id=net0,net=10.0.2.0/24,host=%s,ipv6=off' % (
            HOST_ADDRESS)
        for host_port, dom0_port in self.forwards:
            netdev += ',hostfwd=tcp:127.0.0.1:%d-:%d' % (
                host_port, dom0_port)
        return ['-netdev', netdev,
                '-device', 'virtio-net-pci,netdev=net0']

    def host_root_args(self):
        """The host's root file system, shared read-only with dom0
        (tag hostroot), which dom0's /init lays under /host
        (hypervisor-patches/xen/dom0-hostroot)."""
        if not self.host_root:
            return []
        return ['-virtfs', 'local,path=/,mount_tag=hostroot,'
                'security_model=none,readonly=on,multidevs=remap']

    def start(self, timeout=300):
        """Boot; return once dom0 answers on its port (Xen's toolstack
        is up by then: dom0's /init starts the port's shell last)."""
        control = os.path.join(self.work_dir, 'control.sock')
        with open(os.path.join(self.work_dir, 'qemu.out'), 'wb') as out:
            self.process = subprocess.Popen(
                self.command_line(control), stdout=out,
                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while self.sock is None:
            self._check_alive(deadline)
            try:
                self.sock = socket.socket(socket.AF_UNIX)
                self.sock.connect(control)
            except OSError:
                self.sock = None
                time.sleep(0.5)
        # Until dom0's shell reads the port, what is sent may be lost:
        # ask again until an answer comes.
        while True:
            self._check_alive(deadline)
            try:
                self.run('true', timeout=5)
                break
            except XenError:
                continue
        if self.host_root:
            self._share_project()

    def _share_project(self):
        """This Python's venv and the project at their own paths in
        /host when they are under the host's /tmp, which dom0's own /tmp
        hides there: the host's /tmp bound at /mnt/host-tmp in /host,
        the path's top directory linked from dom0's /tmp."""
        parts = os.path.realpath(sys.prefix).split(os.sep)
        if len(parts) < 3 or parts[1] != 'tmp':
            return
        self.check('mkdir -p /host/mnt/host-tmp && '
                   'mount -o bind /mnt/hostroot/tmp /host/mnt/host-tmp && '
                   'ln -sfn /mnt/host-tmp/%s /tmp/%s' % (
                       shlex.quote(parts[2]), shlex.quote(parts[2])))

    def _check_alive(self, deadline):
        if self.process.poll() is not None:
            raise XenError('QEMU exited (%s): %s' % (
                self.process.returncode, self.serial_tail()))
        if time.monotonic() > deadline:
            raise XenError('dom0 did not answer: %s' % self.serial_tail())

    def serial_tail(self, lines=30):
        """The end of Xen's and dom0's console, for failure messages."""
        try:
            with open(self.serial_log, errors='replace') as log:
                return ''.join(log.readlines()[-lines:])
        except OSError:
            return ''

    def run(self, command, timeout=120):
        """(exit status, output) of shell ``command`` in dom0.

        Each command ends with a marker of its own, so an answer to an
        earlier command that timed out is skipped, not taken for this
        one's.
        """
        marker = 'memcanal-%s' % uuid.uuid4().hex
        self.sock.sendall(('(%s) </dev/null 2>&1; echo; echo "%s $?"\n' % (
            command, marker)).encode())
        deadline = time.monotonic() + timeout
        while True:
            text = self.pending.decode(errors='replace')
            at = text.find(marker + ' ')
            end = text.find('\n', at)
            if at >= 0 and end >= 0:
                status = int(text[at + len(marker) + 1:end])
                output = text[:at]
                self.pending = text[end + 1:].encode()
                # The output's own end, and the echo's newline.
                return status, output[:-1] if output.endswith('\n') \
                    else output
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise XenError('no answer to %r in %d s' % (command, timeout))
            self.sock.settimeout(remaining)
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                continue
            if not data:
                raise XenError('dom0 closed its port: %s'
                               % self.serial_tail())
            self.pending += data

    def check(self, command, timeout=120):
        """``command``'s output; XenError if it fails."""
        status, output = self.run(command, timeout)
        if status:
            raise XenError('%r exited %d: %s' % (command, status, output))
        return output

    def create_pvh(self, name, memory_mb, writer=None, timeout=180):
        """Create PVH domU ``name`` of ``memory_mb`` (Debian's kernel,
        hypervisor-patches/xen/domu-init), running memcanal-writer with
        ``writer`` = (size_mb, write_s, idle_s) if given; its domain id.
        """
        extra = 'console=hvc0'
        if writer:
            extra += ' memcanal.writer=%d:%d:%d' % tuple(writer)
        config = '\n'.join([
            'name = "%s"' % name, 'type = "pvh"', 'vcpus = 1',
            'kernel = "/domu/vmlinuz"', 'ramdisk = "/domu/domu.cpio.gz"',
            'extra = "%s"' % extra,
            'memory = %d' % memory_mb, 'maxmem = %d' % memory_mb, ''])
        path = '/tmp/%s.cfg' % name
        self.check('printf %%s %s > %s' % (shlex.quote(config), path))
        self.check('xl create %s' % path, timeout)
        return int(self.check('xl domid %s' % name))

    def write_file(self, path, text):
        """Write ``text`` to ``path`` in dom0 (its /tmp is /host's)."""
        self.check('printf %%s %s > %s' % (shlex.quote(text),
                                           shlex.quote(path)))

    def has_libvirt(self):
        """Whether dom0's /host has libvirt's Xen driver (the host's
        root shared, tools/build-xen.sh run where libvirt-daemon is)."""
        return self.run('test -e /host%s' % LIBXL_DRIVER)[0] == 0

    def in_host_root(self, command, timeout=300):
        """(exit status, output) of shell ``command`` run as root in
        dom0's /host (the host's root under dom0's Xen), with PATH,
        HOME=/root, LANG and PYTHONDONTWRITEBYTECODE only."""
        return self.run('memcanal-hostroot run %s' % shlex.quote(command),
                        timeout)

    def check_in_host_root(self, command, timeout=300):
        """``in_host_root``'s output; XenError if the command fails."""
        status, output = self.in_host_root(command, timeout)
        if status:
            raise XenError('%r exited %d in /host: %s' % (
                command, status, output))
        return output

    def start_libvirtd(self, timeout=300):
        """Start the host's libvirtd in dom0's /host, its Xen driver
        (libxl) on dom0's toolstack; return once ``virsh -c
        xen:///system`` answers. Its log: dom0's /tmp/libvirtd.log."""
        status, output = self.run('memcanal-hostroot libvirtd', timeout)
        if status:
            raise XenError('libvirtd did not start: %s' % output)

    def virsh(self, arguments, timeout=300):
        """``virsh -c xen:///system ARGUMENTS``' output, in /host."""
        return self.check_in_host_root('virsh -c %s %s' % (
            LIBVIRT_URI, arguments), timeout)

    def create_pvh_libvirt(self, name, memory_mb, writer=None,
                           timeout=300):
        """``create_pvh`` through libvirt's Xen driver (virsh create):
        the domain libvirt knows; its domain id."""
        path = '/tmp/%s.xml' % name
        self.write_file(path, pvh_domain_xml(name, memory_mb, writer))
        self.virsh('create %s' % path, timeout)
        status, output = self.in_host_root('virsh -c %s domid %s' % (
            LIBVIRT_URI, name))
        if status:
            raise XenError('domain %s ended once created: %s\n%s\n%s' % (
                name, output, self.console(name)[-3000:],
                self.run('tail -c 3000 /tmp/libvirtd.log')[1]))
        return int(output)

    def python_command(self, arguments, python=None):
        """A command line running this Python (the project's venv; the
        host's root is /host's) with ``arguments`` in dom0's /host."""
        return '%s %s' % (shlex.quote(python or sys.executable), arguments)

    def start_in_host_root(self, command, log):
        """Start ``command`` in dom0's /host in the background, its
        output to ``log`` (a path under /tmp: dom0's and /host's); its
        pid (dom0's)."""
        return int(self.check_in_host_root(
            'nohup %s > %s 2>&1 < /dev/null & echo $!' % (
                command, shlex.quote(log))))

    def console(self, name):
        """Guest ``name``'s console so far, as xenconsoled logged it."""
        return self.run('cat /var/log/xen/console/guest-%s.log' % name)[1]

    def wait_console(self, name, predicate, timeout=180, what='output'):
        """Guest ``name``'s console once ``predicate`` is true of it."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            console = self.console(name)
            if predicate(console):
                return console
            time.sleep(1)
        raise XenError('guest %s: no %s in %d s: %s' % (
            name, what, timeout, self.console(name)[-2000:]))

    def start_logdirty(self, domid, interval_s, count):
        """Start memcanal-logdirty on ``domid`` in dom0's background."""
        self.check('%s %d %s %d > /tmp/logdirty.%d 2>&1 & '
                   'echo $! > /tmp/logdirty.%d.pid' % (
                       LOGDIRTY, domid, interval_s, count, domid, domid))

    def logdirty_output(self, domid, timeout=120):
        """memcanal-logdirty's output on ``domid``, once it has ended."""
        self.check('pid=$(cat /tmp/logdirty.%d.pid); '
                   'while kill -0 $pid 2>/dev/null; do sleep 0.5; done'
                   % domid, timeout)
        return self.check('cat /tmp/logdirty.%d' % domid)

    def memory_mb_of(self, name):
        """Guest ``name``'s memory as ``xl list`` shows it (MiB)."""
        line = self.check('xl list %s' % name).splitlines()[-1]
        return int(line.split()[2])

    def stop(self):
        """Stop QEMU (Xen with it)."""
        if self.sock is not None:
            self.sock.close()
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def measure(host, memory_mb, size_mb, write_s, idle_s, interval_s):
    """Run memcanal-writer in a fresh PVH guest under memcanal-logdirty;
    the written frames, and the intervals logged until it went idle and
    stayed so ``idle_s`` seconds."""
    name = 'writer%d' % memory_mb
    domid = host.create_pvh(name, memory_mb, (size_mb, write_s, idle_s))
    said = host.wait_console(name, lambda c: parse_writer(c)['writing'],
                             what='writer')
    count = int((write_s + idle_s) / interval_s)
    host.start_logdirty(domid, interval_s, count)
    host.wait_console(name, lambda c: parse_writer(c)['done'],
                      timeout=write_s + idle_s + 120, what='writer: done')
    intervals = parse_logdirty(host.logdirty_output(
        domid, timeout=count * interval_s + 120))
    said = parse_writer(host.console(name))
    return said['frames'], intervals


def passes_unlogged(host, memory_mb, size_mb, write_s):
    """How many passes memcanal-writer makes in a guest not logged: the
    guest's side of log-dirty's cost is the difference."""
    name = 'unlogged%d' % memory_mb
    host.create_pvh(name, memory_mb, (size_mb, write_s, 1))
    said = parse_writer(host.wait_console(
        name, lambda c: parse_writer(c)['done'], timeout=write_s + 180,
        what='writer: done'))
    host.check('xl destroy %s' % name)
    return said['passes']


def timed(call, *args, **kwargs):
    """(seconds, result) of ``call(*args, **kwargs)``."""
    started = time.monotonic()
    result = call(*args, **kwargs)
    return time.monotonic() - started, result


def measure_libvirt(host, memory_mb=256, balloon_mb=128, rabbit_port=5672):
    """Time libvirt's Xen driver and the project's Python in dom0's
    /host: libvirtd's start, virsh create, setmem and how long until
    xl list shows the new size, the imports an agent makes (the first
    run reads the files over 9p, the next from dom0's cache), whether
    the host's RabbitMQ answers from dom0, and memcanal-logdirty run
    there. A dict of what was measured."""
    said = {}
    name = 'lv%d' % memory_mb
    said['libvirtd_s'], _ = timed(host.start_libvirtd)
    said['virsh_list_s'], _ = timed(host.virsh, 'list')
    said['virsh_create_s'], domid = timed(host.create_pvh_libvirt, name,
                                          memory_mb)
    host.wait_console(name, lambda c: 'memcanal-domu: ready' in c,
                      what='its /init')
    said['virsh_setmem_s'], _ = timed(
        host.virsh, 'setmem %s %d --live' % (name, balloon_mb * 1024))
    started = time.monotonic()
    while host.memory_mb_of(name) != balloon_mb:
        if time.monotonic() - started > 300:
            raise XenError('xl list never showed %d MiB' % balloon_mb)
        time.sleep(0.5)
    said['setmem_to_xl_list_s'] = time.monotonic() - started
    said['dommemstat'] = parse_dommemstat(host.virsh('dommemstat ' + name))
    said['python_pass_s'], _ = timed(
        host.check_in_host_root, host.python_command('-c pass'))
    for run in ('cold', 'warm'):
        said['import_memcanal_libvirt_%s_s' % run], _ = timed(
            host.check_in_host_root,
            host.python_command("-c 'import memcanal, libvirt'"))
    for run in ('cold', 'warm'):
        said['import_agent_manager_%s_s' % run], _ = timed(
            host.check_in_host_root,
            host.python_command("-c 'import memcanal.agent.manager'"))
    said['rabbit_from_dom0'] = host.in_host_root(host.python_command(
        "-c 'import socket; socket.create_connection((\"%s\", %d), 10)'"
        % (HOST_ADDRESS, rabbit_port)))[0] == 0
    said['logdirty_in_host_root'] = parse_logdirty(host.check_in_host_root(
        'memcanal-logdirty %d 1 2' % domid))[-1]['pages']
    host.virsh('destroy ' + name)
    return said


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--libvirt', action='store_true',
                        help="time libvirt's Xen driver and Python in "
                        "dom0's /host instead (measure_libvirt)")
    parser.add_argument('--xen-dir', default=XEN_DIR)
    parser.add_argument('--memory-mb', type=int, nargs='+', default=[256])
    parser.add_argument('--size-mb', type=int, default=16)
    parser.add_argument('--write-s', type=int, default=20)
    parser.add_argument('--idle-s', type=int, default=10)
    parser.add_argument('--interval-s', type=float, default=1)
    parser.add_argument('--host-memory-mb', type=int, default=2048)
    args = parser.parse_args()
    host = XenHost(args.xen_dir, memory_mb=args.host_memory_mb)
    started = time.monotonic()
    try:
        host.start()
        print('boot: %.1f s' % (time.monotonic() - started))
        if args.libvirt:
            print(json.dumps(measure_libvirt(host), sort_keys=True))
            return
        for memory_mb in args.memory_mb:
            written, intervals = measure(host, memory_mb, args.size_mb,
                                         args.write_s, args.idle_s,
                                         args.interval_s)
            for interval, (kind, extra) in zip(intervals,
                                               classify(intervals, written)):
                print(json.dumps({
                    'memory_mb': memory_mb, 'interval': interval['interval'],
                    'written': len(written), 'dirty': interval['dirty'],
                    'kind': kind, 'extra': extra,
                    'cost_us': interval['cost_ns'] // 1000}))
            costs = sorted(i['cost_ns'] // 1000 for i in intervals)
            said = parse_writer(host.console('writer%d' % memory_mb))
            host.check('xl destroy writer%d' % memory_mb)
            print(json.dumps({
                'memory_mb': memory_mb, 'passes_logged': said['passes'],
                'passes_unlogged': passes_unlogged(
                    host, memory_mb, args.size_mb, args.write_s),
                'bitmap_bits': intervals[0]['pages'],
                'cost_us_median': costs[len(costs) // 2],
                'cost_us_max': costs[-1]}))
    finally:
        host.stop()
        print('work dir: %s' % host.work_dir)


if __name__ == '__main__':
    main()
