"""The handoff listener takes only a domain's own QEMU's RAM (issue #25).

Every offer here is made by a real process (ACTOR) with a real
userfaultfd and a memfd it maps: the listener's checks read the kernel
(SO_PEERCRED, /proc, kcmp), so nothing stands in for them. A QEMU is an
actor run as root whose pid the test's ``domain_of`` knows; an attacker
is an actor run as nobody (uid 65534), in the socket's group as a
compromised QEMU would be, with ``-uuid`` of the domain it poses as on
its command line and its own memfd and uffd.
"""

import collections
import os
import socket
import subprocess
import threading
import time

import pytest

from memcanal.agent.drivers import handoff
from memcanal.agent.drivers import handoff_checks

NOBODY = 65534
NOGROUP = 65534
MB = 1 << 20

# An offerer of guest RAM, driven line by line on stdin: it maps the
# first MiB of a 2 MiB memfd shared (its "guest RAM", at BASE), holds a
# userfaultfd (user-mode-only unless root), and answers each command
# with one line.
#   offer PATH PID KIND   a v2 handoff claiming PID, as KIND says: own
#                         (its uffd, its memfd at BASE), eventfd (no
#                         uffd), foreign-uffd (a uffd its child made and
#                         sent on its connection), other-memfd (a memfd
#                         it does not map), beyond (a region past its
#                         mapping), offset (the wrong offset), private (a
#                         private mapping), bad-count (no memfd); answers
#                         the connection's number
#   answer I SECONDS      what came on connection I: answered (a byte),
#                         closed, or open (nothing yet)
#   close I               closes connection I
#   idle PATH N           connects N times, sending nothing; answers how
#                         many connected, or how many and the error (a
#                         backlog full for 2 s: ETIMEDOUT)
#   region                answers BASE LEN OFFSET of its own region
ACTOR = r'''
import ctypes, errno, mmap, os, select, socket, struct, sys, time
libc = ctypes.CDLL(None, use_errno=True)
MB = 1 << 20
MAGIC = 0x6d6375666664320a

def userfaultfd():
    user_mode_only = 0 if os.getuid() == 0 else 1
    fd = libc.syscall(323, os.O_CLOEXEC | os.O_NONBLOCK | user_mode_only)
    assert fd >= 0, os.strerror(ctypes.get_errno())
    return fd

def address(mapping):
    return ctypes.addressof(ctypes.c_char.from_buffer(mapping))

memfd = os.memfd_create('actor-ram')
os.ftruncate(memfd, 2 * MB)
ram = mmap.mmap(memfd, MB, mmap.MAP_SHARED)
private = mmap.mmap(memfd, MB, mmap.MAP_PRIVATE)
base = address(ram)
uffd = userfaultfd()
connections = []

def header(pid, regions):
    words = [MAGIC, pid, len(regions)]
    for region in regions:
        words.extend(region)
    return struct.pack('=27Q', *(words + [0] * (27 - len(words))))

def send(connection, data, fds, foreign_uffd):
    """What a refused sender sees is its connection closed, whether
    before or after it sent."""
    try:
        if not foreign_uffd:
            socket.send_fds(connection, [data], fds)
            return
        child = os.fork()
        if child == 0:
            socket.send_fds(connection, [data], [userfaultfd()] + fds[1:])
            os._exit(0)
        os.waitpid(child, 0)
    except OSError:
        pass

def offer(path, pid, kind):
    regions, fds = [(base, MB, 0)], [uffd, memfd]
    if kind == 'eventfd':
        fds[0] = os.eventfd(0)
    elif kind == 'other-memfd':
        fds[1] = os.memfd_create('other')
        os.ftruncate(fds[1], 2 * MB)
    elif kind == 'beyond':
        regions = [(base, 2 * MB, 0)]
    elif kind == 'offset':
        regions = [(base, MB, MB)]
    elif kind == 'private':
        regions = [(address(private), MB, 0)]
    elif kind == 'bad-count':
        fds = [uffd]
    connection = socket.socket(socket.AF_UNIX)
    connection.connect(path)
    send(connection, header(pid, regions), fds, kind == 'foreign-uffd')
    connections.append(connection)
    return len(connections) - 1

def answer(number, seconds):
    connection = connections[number]
    if not select.select([connection], [], [], seconds)[0]:
        return 'open'
    try:
        return 'answered' if connection.recv(1) else 'closed'
    except ConnectionResetError:
        return 'closed'

def connect(connection, path, seconds=2):
    """Connect, but give up once the listener's backlog stayed full
    for ``seconds``: a listener that never accepts must not hang us."""
    connection.setblocking(False)
    deadline = time.monotonic() + seconds
    while True:
        try:
            return connection.connect(path)
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise TimeoutError(errno.ETIMEDOUT, 'backlog full')
            time.sleep(0.001)

def idle(path, count):
    for done in range(count):
        connection = socket.socket(socket.AF_UNIX)
        try:
            connect(connection, path)
        except OSError as error:
            return '%d %s' % (done, errno.errorcode[error.errno])
        connections.append(connection)
    return str(count)

for line in sys.stdin:
    verb, *args = line.split()
    if verb == 'offer':
        print(offer(args[0], int(args[1]), args[2]), flush=True)
    elif verb == 'answer':
        print(answer(int(args[0]), float(args[1])), flush=True)
    elif verb == 'close':
        connections[int(args[0])].close()
        print('closed', flush=True)
    elif verb == 'idle':
        print(idle(args[0], int(args[1])), flush=True)
    elif verb == 'region':
        print(base, MB, 0, flush=True)
'''


def wait(predicate, what, timeout=20):
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        assert time.monotonic() < deadline, what
        time.sleep(0.02)
    return value


class Actor:
    """An ACTOR process, as root (a QEMU) or as ``user`` (an attacker)
    with ``-uuid uuid`` on its command line."""

    def __init__(self, user=None, group=None, extra_groups=None, uuid=None):
        arguments = ['/usr/bin/python3', '-c', ACTOR]
        if uuid is not None:
            arguments += ['-uuid', uuid]
        self.process = subprocess.Popen(
            arguments, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            text=True, user=user, group=group, extra_groups=extra_groups)
        self.pid = self.process.pid

    def command(self, line):
        self.process.stdin.write(line + '\n')
        self.process.stdin.flush()
        answer = self.process.stdout.readline().strip()
        assert answer, 'the actor died'
        return answer

    def offer(self, path, pid=None, kind='own'):
        """The number of the connection the offer went on."""
        return int(self.command('offer %s %d %s' % (
            path, self.pid if pid is None else pid, kind)))

    def answer(self, number, seconds=10):
        return self.command('answer %d %s' % (number, seconds))

    def region(self):
        return tuple(int(word) for word in self.command('region').split())

    def stop(self):
        self.process.kill()
        self.process.wait()


@pytest.fixture
def actors():
    """``start(...)``: an Actor, stopped after the test."""
    started = []

    def start(**kwargs):
        started.append(Actor(**kwargs))
        return started[-1]
    yield start
    for actor in started:
        actor.stop()


def attacker(actors, uuid='vm'):
    """nobody, in the socket's group (nogroup), posing as ``uuid``."""
    return actors(user=NOBODY, group=NOGROUP, uuid=uuid)


def domains_of(known):
    """A listener's ``domain_of`` from ``known`` {pid: uuid}: what libvirt
    would say of each pid."""
    def domain_of(peer):
        if peer.pid not in known:
            raise handoff_checks.Refused(
                code='not_qemu', reason='pid %d runs no domain' % peer.pid)
        return known[peer.pid]
    return domain_of


@pytest.fixture
def run_dir(short_tmp_path):
    """A directory nobody can traverse to the socket's."""
    os.chmod(short_tmp_path, 0o755)
    return short_tmp_path


@pytest.fixture
def listen(run_dir):
    """``make(known, take_now=None)``: a Listener on run_dir/run/vm.sock
    of group nogroup, the QEMUs ``known`` {pid: uuid}; closed after."""
    listeners = []

    def make(known, take_now=None):
        listeners.append(handoff.Listener(
            os.path.join(run_dir, 'run', 'vm.sock'), domains_of(known),
            take_now=take_now, gid=NOGROUP))
        return listeners[-1]
    yield make
    for listener in listeners:
        listener.close()


def refusals(listener, expected):
    """Wait until ``listener`` refused as ``expected`` {code: count}."""
    return wait(lambda: listener.refused == collections.Counter(expected),
                'refused %s, not %s' % (listener.refused, expected))


def test_the_peer_is_who_the_kernel_says_not_the_header(listen, actors):
    qemu = actors()
    listener = listen({qemu.pid: 'vm'})
    impostor = attacker(actors)
    connection = impostor.offer(listener.path, pid=qemu.pid)
    assert impostor.answer(connection) == 'closed'
    refusals(listener, {'not_qemu': 1})
    assert listener.held() == set()
    # The domain's QEMU, whatever pid its header gives: its own.
    qemu.offer(listener.path, pid=1)
    wait(lambda: listener.held() == {'vm'}, 'not held')
    held = listener.take('vm')
    assert (held.pid, held.regions) == (qemu.pid, [qemu.region()])
    # The pager is told the kernel's pid.
    assert handoff.unpack(held.header, 2) == (qemu.pid, [qemu.region()])
    held.close()


@pytest.mark.parametrize('kind, code', [
    ('eventfd', 'not_uffd'),
    ('foreign-uffd', 'foreign_uffd'),
    ('other-memfd', 'foreign_memory'),
    ('beyond', 'foreign_memory'),
    ('offset', 'foreign_memory'),
    ('private', 'foreign_memory'),
    ('bad-count', 'bad_header'),
])
def test_the_descriptors_must_be_the_qemus_own(listen, actors, kind, code):
    """A domain's QEMU (a compromised one) offers what is not its own
    uffd, or memory it does not map shared where the header says."""
    qemu = actors()
    listener = listen({qemu.pid: 'vm'})
    assert qemu.answer(qemu.offer(listener.path, kind=kind)) == 'closed'
    refusals(listener, {code: 1})
    assert listener.held() == set()


def test_one_handoff_held_per_domain(listen, actors):
    qemu = actors()
    impostor = attacker(actors)
    listener = listen({qemu.pid: 'vm'})
    first = qemu.offer(listener.path)
    wait(lambda: listener.held() == {'vm'}, 'not held')
    # Neither another process nor the same QEMU replaces it while it is
    # open.
    assert impostor.answer(impostor.offer(listener.path, qemu.pid)) == \
        'closed'
    assert qemu.answer(qemu.offer(listener.path)) == 'closed'
    refusals(listener, {'not_qemu': 1, 'held': 1})
    assert qemu.answer(first, 0.2) == 'open'
    # Once it is gone, the next offer is held.
    qemu.command('close %d' % first)
    third = qemu.offer(listener.path)
    wait(lambda: listener.accepted == 2, 'not taken')
    listener.take('vm').close()
    assert qemu.answer(third) == 'closed'


def open_descriptors():
    return len(os.listdir('/proc/self/fd'))


def test_idle_connections_take_no_slot_of_a_qemu(listen, actors):
    """400 idle connections, of a process that is no QEMU and of a
    QEMU of another domain, bound what the listener holds, and the
    domain's QEMU hands its RAM over meanwhile."""
    qemu = actors()
    other = actors()
    impostor = attacker(actors)
    listener = listen({qemu.pid: 'vm', other.pid: 'vm-b'})
    before = open_descriptors()
    assert impostor.command('idle %s 400' % listener.path) == '400'
    assert other.command('idle %s 400' % listener.path) == '400'
    assert open_descriptors() <= before + handoff.Listener.PENDING
    qemu.offer(listener.path)
    wait(lambda: listener.held() == {'vm'}, 'the QEMU\'s offer not held')
    # Each of the other QEMU's idle connections was refused as another
    # waited, or once it had waited its time out.
    wait(lambda: listener.refused['not_qemu'] == 400 and
         listener.refused['busy'] + listener.refused['timeout'] == 400,
         'refused %s' % listener.refused)
    assert listener.refused['timeout'] >= 1
    # The offer: its connection, uffd and memfd.
    assert open_descriptors() <= before + 3


def test_the_socket_is_open_to_the_qemu_group_only(listen, actors,
                                                   run_dir):
    qemu = actors()
    listener = listen({qemu.pid: 'vm'})
    status = os.stat(listener.path)
    assert (status.st_mode & 0o7777, status.st_uid, status.st_gid) == (
        0o660, 0, NOGROUP)
    outsider = actors(user=NOBODY, group=1, extra_groups=[], uuid='vm')
    assert outsider.command('idle %s 1' % listener.path) == '0 EACCES'
    assert listener.refused == collections.Counter()
    # A directory others may write to (replace the socket in) is refused.
    shared = os.path.join(run_dir, 'shared')
    os.mkdir(shared)
    os.chmod(shared, 0o777)
    with pytest.raises(handoff.HandoffError, match='writable'):
        handoff.Listener(os.path.join(shared, 'vm.sock'),
                         domains_of({}), gid=NOGROUP)
    assert not os.path.exists(os.path.join(shared, 'vm.sock'))


def test_a_reoffer_is_checked_and_held_as_one(listen, actors):
    qemu = actors()
    listener = listen({qemu.pid: 'vm'})
    first = qemu.offer(listener.path)
    wait(lambda: listener.held() == {'vm'}, 'not held')
    held = listener.take('vm')
    assert not held.reoffer
    held.close()
    assert qemu.answer(first) == 'closed'
    # The shim offers its uffd again (its pager died): checked as any.
    assert qemu.answer(qemu.offer(listener.path, kind='foreign-uffd')) == \
        'closed'
    refusals(listener, {'foreign_uffd': 1})
    qemu.offer(listener.path)
    wait(lambda: listener.held() == {'vm'}, 'no re-offer held')
    assert listener.take('vm').reoffer


def test_a_held_handoff_of_a_qemu_that_exited_is_dropped(listen, actors):
    qemu = actors()
    listener = listen({qemu.pid: 'vm'})
    qemu.offer(listener.path)
    wait(lambda: listener.held() == {'vm'}, 'not held')
    listener.drop_abandoned()
    assert listener.held() == {'vm'}
    qemu.stop()
    wait(lambda: (listener.drop_abandoned(), listener.held())[1] == set(),
         'not dropped')


def test_a_relay_hands_the_shims_connection_to_the_pager(listen, actors,
                                                         run_dir):
    """The pager gets QEMU's descriptors and its connection last, answers
    the relay, and talks to QEMU directly; the relay keeps nothing."""
    qemu = actors()
    listener = listen({qemu.pid: 'vm'})
    pager_path = os.path.join(run_dir, 'pager.sock')
    pager = socket.socket(socket.AF_UNIX)
    pager.bind(pager_path)
    pager.listen(1)
    shim = qemu.offer(listener.path)
    wait(lambda: listener.held(), 'not held')
    held = listener.take('vm')
    relayed = []

    def serve():
        connection, _ = pager.accept()
        data, fds, _, _ = socket.recv_fds(connection, handoff.HEADER.size,
                                          4)
        relayed.append((data, fds))
        socket.socket(fileno=fds[-1]).sendall(b'k')
        connection.sendall(b'k')
    thread = threading.Thread(target=serve)
    thread.start()
    try:
        held.relay(pager_path, 10)
    finally:
        thread.join()
        pager.close()
    [(data, fds)] = relayed
    assert handoff.unpack(data, len(fds) - 1) == (qemu.pid, [qemu.region()])
    assert len(fds) == 3 and held.fds == []
    assert qemu.answer(shim) == 'answered'
    for fd in fds[:-1]:
        os.close(fd)
    # Once the pager's copy is gone too, QEMU sees the end: it would
    # offer its RAM again.
    assert qemu.answer(shim) == 'closed'


def test_a_listener_whose_taker_fails_lets_the_offer_go(listen, actors):
    def take_now(uuid, offer):
        raise RuntimeError('broken')
    qemu = actors()
    listener = listen({qemu.pid: 'vm'}, take_now)
    assert qemu.answer(qemu.offer(listener.path)) == 'closed'
    assert listener.held() == set()


def test_a_closed_listener_removes_its_socket(run_dir, actors):
    qemu = actors()
    listener = handoff.Listener(os.path.join(run_dir, 'vm.sock'),
                                domains_of({qemu.pid: 'vm'}), gid=NOGROUP)
    shim = qemu.offer(listener.path)
    wait(lambda: listener.held(), 'not held')
    listener.close()
    assert not os.path.exists(listener.path)
    assert qemu.answer(shim) == 'closed'
