"""Each way guest RAM reaches memcanal-pager, on the real test guest.

test_guest_paging.py pages the test guest through the LD_PRELOAD shim
under TCG. Here the same guest check runs through the other carriers of
the handoff (issue #17): the TCG plugin, the shim under KVM, and the shim
in a domain of the real libvirtd (doc/paging.md, "libvirt guests"). In
each, the guest writes 96 MiB of random data and notes its md5sum, the
pager swaps out all of guest RAM to a file, and the guest's md5sum -c
passes with every page faulted back through the pager. The pager samples
the guest's accesses meanwhile (issue #24): each carrier keeps QEMU's end
of the handoff connection and zaps the sample when the pager asks.
"""

import os
import shutil
import socket
import subprocess
import uuid

import pytest

from memcanal.tests.functional import guests
from memcanal.tests.functional import services
from memcanal.tests.functional import test_guest_paging as paging
from memcanal.tests.functional import test_pager as pager_tests

pytestmark = pytest.mark.functional

# The test guest's initramfs with /pagecheck, shared with
# test_guest_paging.py.
initrd = paging.initrd

PLUGIN = 'libmemcanal-uffd-plugin.so'
SHIM = 'libmemcanal-uffd.so'
DOWNLOADS = os.path.join(services.PAGER_SOURCE, '..', '..', 'build',
                         'downloads')


@pytest.fixture(scope='module')
def build(tmp_path_factory):
    """The pager, the shim and the TCG plugin (QEMU's plugin header from
    the source package tools/build-test-guest.sh already downloaded)."""
    build = services.build_pager(tmp_path_factory.mktemp('pager-build'))
    subprocess.run(['make', '-C', services.PAGER_SOURCE, 'plugin',
                    'BUILD=%s' % build, 'DOWNLOADS=%s' % DOWNLOADS],
                   check=True, capture_output=True)
    return build


@pytest.fixture
def scratch(short_tmp_path):
    """A directory libvirt's unprivileged QEMU can read and connect in."""
    os.chmod(short_tmp_path, 0o755)
    return short_tmp_path


@pytest.fixture
def pager(build, scratch):
    """memcanal-pager listening on scratch/pager.sock, one file store,
    sealing with a VM key, sampling."""
    path = os.path.join(scratch, 'pager.sock')
    key = pager_tests.key_file(os.path.join(scratch, 'vm.key'))
    pager = paging.Pager(build / 'memcanal-pager', path,
                         ['file:%s' % os.path.join(scratch, 'pages')],
                         paging.SAMPLING + ['--key-file', key])
    pager.event('listening')
    os.chmod(path, 0o666)
    pager.socket = path
    yield pager
    if pager.process.poll() is None:
        pager.process.kill()
        pager.process.wait(10)


class Console:
    """A guest's serial console: the lines it prints, and input to it."""

    def __init__(self, output, input):
        self.lines, self.seen = services.lines_of(output), []
        self._input = input

    def wait(self, pattern, timeout=240):
        return paging.wait_line(self.lines, pattern, timeout, self.seen)

    def send(self, line):
        self._input.write(line + '\n')
        self._input.flush()


@pytest.fixture
def run_qemu():
    """Start QEMU with its serial console on stdio; killed afterwards."""
    started = []

    def run(command, env):
        vm = subprocess.Popen(command, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True,
                              bufsize=1, env=env)
        started.append(vm)
        return vm
    yield run
    for vm in started:
        if vm.poll() is None:
            vm.kill()
            vm.wait(10)


def page_out_and_check(pager, console):
    """Once the guest wrote its pattern, swap all guest RAM out, then
    have the guest check the pattern: all of it faults back in. The
    memory freed is the memfd's: sampling unmaps pages from QEMU, so its
    RssShmem is no measure of what the guest holds."""
    console.wait('pagecheck: written')
    before_kib = pager.command('stats', 'stats')['memfd_kib']
    out = pager.command('swapout 0 %d' % paging.PAGES, 'swapout')
    assert out['dropped'] * 4 > paging.DATA_MB * 1024, out
    assert out['lost'] == 0, out
    assert out['memfd_kib'] < before_kib - paging.DATA_MB * 1024, (
        before_kib, out['memfd_kib'])
    console.send('check')
    verdict = console.wait('pagecheck: (ok|BAD)')
    samples, stats = pager.batch('samples', 'stats')
    print('swapout', out, '\nafter check', stats,
          '\nmemfd KiB before %d paged %d' % (before_kib, out['memfd_kib']))
    assert 'pagecheck: ok' in verdict, ''.join(console.seen)
    assert stats['lost'] == 0 and stats['sealed'], stats
    assert stats['served'][0] > paging.DATA_MB * 256 // 2, stats
    # Sampled all along: every interval's zap went through QEMU's end.
    assert samples['sampling'] and samples['intervals'], samples['overflow']
    paging.check_zaps(stats, samples['intervals'])
    assert paging.touched_pages(samples['intervals'])


def attached_to(pager, pid):
    """Wait until QEMU (pid, unless None) handed its one region over
    (v2 handoff) and the pager samples it."""
    attached = pager.event('attached')
    assert attached['len'] == paging.GUEST_MB * 2 ** 20, attached
    assert len(attached['regions']) == 1, attached
    assert attached['sampling']['enabled'], attached
    assert pid is None or attached['pid'] == pid, attached


def test_tcg_plugin_hands_guest_ram_to_the_pager(build, initrd, pager,
                                                 run_qemu):
    guest, path = initrd
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(('LD_PRELOAD', 'MEMCANAL_PAGER'))}
    vm = run_qemu(paging.guest_command(guest, path) + [
        '-plugin', '%s,socket=%s' % (build / PLUGIN, pager.socket)], env)
    attached_to(pager, vm.pid)
    page_out_and_check(pager, Console(vm.stdout, vm.stdin))
    assert vm.wait(120) == 0


def hardware_kvm():
    """Why KVM cannot boot the test guest here, or None.

    /dev/kvm may be kvm_pvm (PVM, a software hypervisor for hosts that
    are themselves VMs without nested VMX/SVM): it runs PVM-enabled guest
    kernels only; a stock guest never gets past SeaBIOS's 32-bit code.
    """
    if not os.path.exists('/dev/kvm'):
        return '/dev/kvm does not exist'
    with open('/proc/cpuinfo') as cpuinfo:
        flags = cpuinfo.read().split()
    if 'vmx' not in flags and 'svm' not in flags:
        pvm = os.path.exists('/sys/module/kvm_pvm')
        return ('no VMX/SVM on this CPU%s: a stock kernel does not boot '
                'under it' % (': /dev/kvm is kvm_pvm' if pvm else ''))
    return None


def test_shim_under_kvm(build, initrd, pager, run_qemu):
    why = hardware_kvm()
    if why:
        pytest.skip('KVM cannot run the test guest: %s' % why)
    guest, path = initrd
    command = paging.guest_command(guest, path)
    command[command.index('-accel') + 1] = 'kvm'
    vm = run_qemu(command, dict(os.environ, LD_PRELOAD=str(build / SHIM),
                                MEMCANAL_PAGER_SOCKET=pager.socket))
    attached_to(pager, vm.pid)
    page_out_and_check(pager, Console(vm.stdout, vm.stdin))
    assert vm.wait(120) == 0


def readable_copies(directory, **sources):
    """Copies of ``sources`` that an unprivileged QEMU can read."""
    copies = {name: shutil.copy(source, directory)
              for name, source in sources.items()}
    for copy in copies.values():
        os.chmod(copy, 0o644)
    return copies


# Gives the command after it a private /dev/userfaultfd of group $2, mode
# 0660 (what doc/paging.md asks of a libvirt host); $1: a scratch mount.
PRIVATE_USERFAULTFD = (
    'mount -t tmpfs -o mode=755 none "$1" && '
    'mknod -m 660 "$1/userfaultfd" c %d %d && chgrp "$2" "$1/userfaultfd" '
    '&& mount --bind "$1/userfaultfd" /dev/userfaultfd && shift 2 && '
    'exec "$@"')


def test_shim_in_an_unprivileged_qemu_opens_dev_userfaultfd(
        build, initrd, pager, scratch, run_qemu):
    """libvirt runs QEMU as its own user without capabilities, where
    userfaultfd(2) is refused: the shim creates the uffd through
    /dev/userfaultfd instead, which its file mode lets QEMU open."""
    guest, path = initrd
    files = readable_copies(scratch, vmlinux=guest['vmlinux'], initrd=path,
                            shim=build / SHIM)
    device = os.stat('/dev/userfaultfd').st_rdev
    devices = os.path.join(scratch, 'dev')
    os.mkdir(devices)
    command = [
        'unshare', '--mount', '--propagation', 'private', 'sh', '-c',
        PRIVATE_USERFAULTFD % (os.major(device), os.minor(device)), 'sh',
        devices, 'nogroup', 'setpriv', '--reuid=nobody', '--regid=nogroup',
        '--clear-groups', '--inh-caps=-all', '--bounding-set=-all', 'env',
        'LD_PRELOAD=%s' % files['shim'],
        'MEMCANAL_PAGER_SOCKET=%s' % pager.socket,
    ] + paging.guest_command(dict(guest, vmlinux=files['vmlinux']),
                             files['initrd'])
    vm = run_qemu(command, os.environ)
    attached_to(pager, vm.pid)
    page_out_and_check(pager, Console(vm.stdout, vm.stdin))
    assert vm.wait(120) == 0


DOMAIN = '''<domain type='qemu'
        xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'>
  <name>memcanal-paging-%(short)s</name>
  <uuid>%(uuid)s</uuid>
  <memory unit='MiB'>%(memory_mb)d</memory>
  <memoryBacking><source type='memfd'/><access mode='shared'/></memoryBacking>
  <vcpu>1</vcpu>
  <os><type arch='x86_64' machine='q35'>hvm</type>
    <kernel>%(kernel)s</kernel><initrd>%(initrd)s</initrd>
    <cmdline>console=ttyS0 panic=-1 rdinit=/pagecheck</cmdline></os>
  <on_poweroff>destroy</on_poweroff>
  <devices>
    <serial type='unix'><source mode='connect' path='%(console)s'/>
      <target port='0'/></serial>
    <memballoon model='none'/>
  </devices>
  <qemu:commandline>
    <qemu:env name='LD_PRELOAD' value='%(shim)s'/>
    <qemu:env name='MEMCANAL_PAGER_SOCKET' value='%(socket)s'/>
  </qemu:commandline>
</domain>'''


@pytest.fixture
def libvirt_connection():
    yield from guests.libvirt_connection()


class UnprivilegedUserfaultfd:
    """vm.unprivileged_userfaultfd = 1 until exited.

    libvirt runs QEMU as an unprivileged user without CAP_SYS_PTRACE and
    with a private /dev lacking /dev/userfaultfd; on a host not set up
    for paging (doc/paging.md), this sysctl is what lets the shim create
    its uffd. Only the creation needs it, so it is on from the domain's
    start to the handoff, and restored then.
    """

    PATH = '/proc/sys/vm/unprivileged_userfaultfd'

    def __enter__(self):
        with open(self.PATH) as knob:
            self.previous = knob.read().strip()
        with open(self.PATH, 'w') as knob:
            knob.write('1')

    def __exit__(self, *exc_info):
        with open(self.PATH, 'w') as knob:
            knob.write(self.previous)


def console_listener(path):
    """A Unix socket at ``path`` for a domain's serial console (``<serial
    type='unix'>`` connecting), open to libvirt's QEMU user."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    os.chmod(path, 0o666)
    listener.listen(1)
    return listener


def destroy_unless_gone(domain):
    """Destroy the transient domain unless it has gone already: a guest
    that powers off after its check may go between isActive and destroy
    (CI: 'Domain not found' from the destroy)."""
    import libvirt

    try:
        domain.destroy()
    except libvirt.libvirtError as error:
        if error.get_error_code() != libvirt.VIR_ERR_NO_DOMAIN:
            raise


def test_libvirt_domain_with_the_shim(build, initrd, pager, scratch,
                                      libvirt_connection):
    guest, path = initrd
    files = readable_copies(scratch, kernel=guest['vmlinux'], initrd=path,
                            shim=build / SHIM)
    console_path = os.path.join(scratch, 'console.sock')
    listener = console_listener(console_path)
    instance = str(uuid.uuid4())
    xml = DOMAIN % dict(files, short=instance[:8], uuid=instance,
                        memory_mb=paging.GUEST_MB, console=console_path,
                        socket=pager.socket)
    with UnprivilegedUserfaultfd():
        domain = libvirt_connection.createXML(xml, 0)
        try:
            attached_to(pager, None)
        except BaseException:
            domain.destroy()
            raise
    try:
        serial, _ = listener.accept()
        stream = serial.makefile('rw', errors='replace', newline='')
        page_out_and_check(pager, Console(stream, stream))
    finally:
        destroy_unless_gone(domain)
        listener.close()
