"""A memcanal-pager and a QEMU with the shim, as real processes that
speak their protocols (spec sections 1-4) and do nothing else.

FAKE_QEMU maps one memfd per region (``-m MB`` or ``--regions MB,MB``),
writes its first ``--resident`` pages, and does what
libmemcanal-uffd.so does: it offers ``[uffd, memfds...]`` (a real
userfaultfd, made by the syscall: tests run as root) on
``MEMCANAL_PAGER_SOCKET`` with a v2 header, waits for the answer, keeps
the connection (ignoring zap requests) and, when it ends (its pager
died), offers the same again every 200 ms. A first offer nobody answers
is not made again, as the shim gives up. ``-uuid`` is on its command
line, as on libvirt's QEMUs'.

FAKE_PAGER takes a direct or relayed handoff on ``--socket``, answers
the control protocol on ``--control`` (hello, store, samples, swapout,
swapin, faults, stats, quit), pages the memfds it was handed (punch,
write back), keeps ``--state`` (QEMU's pid and the pages out) so that a
pager started on it again takes over, and exits once its QEMU has.
``inject JSON`` queues sampling intervals and faults for the next
``samples`` and ``faults``. It checks what issue #25's pager checks
before it uses them: ``--key-file`` (a regular file of its own, 0600,
32 bytes, not a symlink), and for a ``tls:HOST:PORT`` store
``--tls-ca`` and the store's lease token (in the file
``--store-token-file`` after it names, checked as the key file is, or
``store SPEC TOKEN``: base64 of 240 bytes, for its ``--owner``); a
``store`` of a ``tls:`` store it has is a newer lease, whose token
replaces the old. ``stats`` says what it was given: its ``args``,
``stores`` and, a fake's alone, each store's ``tokens``.
"""

import base64
import os
import struct
import sys

from memcanal.agent import paging

# A memory server the service lends (the fake pager connects to none),
# and the memory servers' CA file ([pooling] tls_ca_file).
STORE = 'tls:10.0.0.5:7400'
CA = '/etc/memcanal/memserver-ca.pem'


def lease_token(instance_uuid, lease=b'lease'):
    """A stand-in lease token for the VM's pages, base64, as a page
    action carries it: 240 bytes, the owner where a real one has it (the
    fake pager connects to no server, so it need not be signed)."""
    return base64.b64encode((lease.ljust(24, b'.') + struct.pack(
        '<Q', paging.owner_of(instance_uuid))).ljust(240, b'.')).decode()


FAKE_QEMU = r'''#!%(python)s
import mmap, os, socket, struct, sys, time
args = sys.argv[1:]
def arg(name, default):
    return args[args.index(name) + 1] if name in args else default
regions_mb = [int(mb) for mb in arg('--regions', arg('-m', '1')).split(',')]
resident = int(arg('--resident', '0'))
path = os.environ['MEMCANAL_PAGER_SOCKET']
memfds, maps, regions = [], [], []
import ctypes
for number, mb in enumerate(regions_mb):
    fd = os.memfd_create('fake-ram-%%d' %% number)
    os.ftruncate(fd, mb << 20)
    mapping = mmap.mmap(fd, mb << 20, mmap.MAP_SHARED)
    base = ctypes.addressof(ctypes.c_char.from_buffer(mapping))
    memfds.append(fd); maps.append(mapping)
    regions.append((base, mb << 20, 0))
os.pwrite(memfds[0], b'd' * 4096 * resident, 0)
words = [0x6d6375666664320a, os.getpid(), len(regions)]
for region in regions:
    words.extend(region)
header = struct.pack('=27Q', *(words + [0] * (27 - len(words))))
uffd = ctypes.CDLL(None).syscall(323, os.O_CLOEXEC | os.O_NONBLOCK)
handed = False
while True:
    try:
        with socket.socket(socket.AF_UNIX) as connection:
            connection.connect(path)
            socket.send_fds(connection, [header], [uffd] + memfds)
            if connection.recv(1) == b'k':
                handed = True
                print('handed', flush=True)
                while connection.recv(4096):
                    pass
    except OSError:
        pass
    if not handed:
        print('handoff failed', flush=True)
        while True:
            time.sleep(3600)
    time.sleep(0.2)
'''

FAKE_PAGER = r'''#!%(python)s
import argparse, base64, ctypes, json, os, select, signal, socket, stat
import struct, sys, time
parser = argparse.ArgumentParser()
for name in ('--socket', '--control', '--state', '--owner', '--pool-mb',
             '--pool', '--sample-salt', '--key-file', '--tls-ca'):
    parser.add_argument(name)
parser.add_argument('--sample-rate', type=float, default=0.0)
parser.add_argument('--sample-interval-ms', type=int, default=10000)
parser.add_argument('--full-pass-every', type=int, default=0)
def secret(path, size):
    """What the file at path holds, if it is the pager's alone (a
    regular file of its euid, 0600, not a symlink) of size bytes."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as error:
        sys.exit('memcanal-pager: %%s: %%s' %% (path, error))
    try:
        status = os.fstat(fd)
        if not (stat.S_ISREG(status.st_mode)
                and status.st_uid == os.geteuid()
                and stat.S_IMODE(status.st_mode) == 0o600
                and status.st_size == size):
            sys.exit('memcanal-pager: %%s: not the pager\'s alone' %% path)
        return os.read(fd, size)
    finally:
        os.close(fd)

# Stores in order, each with the token of the file given after it.
stores, tokens, rest, argv = [], [], [], iter(sys.argv[1:])
swap_to = []
for word in argv:
    if word == '--store':
        stores.append(next(argv))
        tokens.append(None)
    elif word == '--store-token-file':
        if not stores or tokens[-1] is not None:
            sys.exit('memcanal-pager: --store-token-file without its '
                     '--store')
        tokens[-1] = secret(next(argv), 320).decode()
    else:
        rest.append(word)
a = parser.parse_args(rest)

def store_refusal(spec, token):
    """Why the pager would not use the store, or None."""
    kind = spec.split(':', 1)[0]
    if kind not in ('file', 'tcp', 'tls'):
        return 'no such store kind'
    if token and kind != 'tls':
        return 'only tls: stores take a token'
    if kind != 'tls':
        return None
    if not a.tls_ca:
        return 'a tls: store needs --tls-ca'
    try:
        raw = base64.b64decode(token or '', validate=True)
    except ValueError:
        return 'a lease token is base64'
    if len(raw) != 240:
        return 'a lease token is 240 bytes'
    if struct.unpack_from('<Q', raw, 24)[0] != int(a.owner or 1):
        return 'the lease token is for another owner'
    return None

if a.key_file:
    secret(a.key_file, 32)
else:
    print('memcanal-pager: no --key-file: pages go out in plaintext',
          file=sys.stderr, flush=True)
for spec, token in zip(stores, tokens):
    if store_refusal(spec, token):
        sys.exit('memcanal-pager: %%s: %%s' %% (spec, store_refusal(spec,
                                                                  token)))
libc = ctypes.CDLL(None)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long,
                           ctypes.c_long]
PAGE = 4096

def alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except OSError:
        return False

state = {}
if a.state and os.path.exists(a.state):
    with open(a.state) as f:
        state = json.load(f)
adopting = bool(state) and alive(state['pid'])
out = set(state.get('out', [])) if adopting else set()

def save():
    if a.state:
        with open(a.state, 'w') as f:
            json.dump({'pid': attached['pid'], 'out': sorted(out)}, f)

def listen(path):
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    s = socket.socket(socket.AF_UNIX)
    s.bind(path)
    s.listen(4)
    return s

control = listen(a.control)
handoffs = listen(a.socket)
attached, memfds, shim, client, buffered = None, [], None, None, b''
pending = {'intervals': [], 'faults': []}

def where(page):
    for fd, (_, length, offset) in zip(memfds, attached['regions']):
        if page < length // PAGE:
            return fd, offset + page * PAGE
        page -= length // PAGE
    raise IndexError(page)

def resident(page):
    fd, at = where(page)
    try:
        return os.lseek(fd, at, os.SEEK_DATA) == at
    except OSError:
        return False

def take_handoff():
    global attached, memfds, shim, handoffs
    connection, _ = handoffs.accept()
    data, fds, _, _ = socket.recv_fds(connection, 216, 10)
    words = struct.unpack('=27Q', data)
    count = words[2]
    regions = [list(words[3 + 3 * i:6 + 3 * i]) for i in range(count)]
    relayed = len(fds) == count + 2
    shim = socket.socket(fileno=fds[-1]) if relayed else connection
    memfds = fds[1:count + 1]
    shim.sendall(b'k')
    if relayed:
        connection.sendall(b'k')
        connection.close()
    attached = {'pid': words[1], 'regions': regions,
                'pages': sum(r[1] for r in regions) // PAGE,
                'relayed': relayed}
    save()
    handoffs.close()
    os.unlink(a.socket)
    handoffs = None

def answer(line):
    verb, *rest = line.split(None, 1)
    numbers = [int(word) for word in rest[0].split()] if (
        rest and verb in ('swapout', 'swapoutv', 'swapin')) else []
    if verb == 'hello':
        if attached is None:
            return {'event': 'hello', 'attached': False}
        return dict(attached, event='hello', attached=True,
                    adopted=adopting, stores=stores,
                    swap_to=swap_to or stores)
    if verb == 'store':
        spec, *token = rest[0].split()
        token = token[0] if token else None
        if spec not in stores and len(stores) >= 4:
            return {'event': 'error', 'line': 'too many stores'}
        if store_refusal(spec, token):
            return {'event': 'error', 'line': 'store: cannot open it'}
        answer = {'event': 'store'}
        if spec not in stores:
            stores.append(spec)
            tokens.append(token)
        elif token:
            tokens[stores.index(spec)] = token      # a newer lease
            answer['renewed'] = True
        return dict(answer, stores=stores, copies=len(stores))
    if verb == 'samples':
        intervals, pending['intervals'] = pending['intervals'], []
        return {'event': 'samples', 'sampling': a.sample_rate > 0,
                'rate': a.sample_rate, 'salt': 0x6d656d63616e616c,
                'interval_ms': a.sample_interval_ms,
                'full_pass_every': a.full_pass_every, 'overflow': 0,
                'intervals': intervals}
    if verb == 'faults':
        faults, pending['faults'] = pending['faults'], []
        for page in faults:
            fd, at = where(page)
            os.pwrite(fd, b'f', at)
            out.discard(page)
        return {'event': 'faults', 'faults': faults, 'cancelled': [],
                'overflow': 0}
    if verb in ('swapout', 'swapoutv'):
        dropped = 0
        for first, count in zip(numbers[::2], numbers[1::2]):
            for page in range(first, first + count):
                if resident(page):
                    fd, at = where(page)
                    libc.fallocate(fd, 3, at, PAGE)
                    out.add(page)
                    dropped += 1
        save()
        return {'event': verb, 'dropped': dropped}
    if verb == 'swapin':
        first, count = numbers
        back = [page for page in range(first, first + count) if page in out]
        for page in back:
            fd, at = where(page)
            os.pwrite(fd, b'i' * PAGE, at)
            out.discard(page)
        save()
        return {'event': 'swapin', 'fetched': len(back)}
    if verb == 'swapto':
        specs = rest[0].split() if rest else []
        unknown = [spec for spec in specs if spec not in stores]
        if unknown:
            return {'event': 'error', 'line': 'swapto: no store %%s'
                    %% unknown[0]}
        swap_to[:] = [spec for spec in stores if spec in specs] or stores
        return {'event': 'swapto', 'stores': stores, 'swap_to': swap_to}
    if verb == 'stats':
        return {'event': 'stats', 'out_pages': len(out),
                'args': sys.argv[1:], 'stores': stores, 'tokens': tokens}
    if verb == 'inject':
        for key, values in json.loads(rest[0]).items():
            pending[key].extend(values)
        return {'event': 'inject'}
    if verb == 'quit':
        sys.exit(0)
    return {'event': 'error', 'line': 'bad command'}

print('fake pager %%d' %% os.getpid(), flush=True)
while attached is None or alive(attached['pid']):
    watched = [control if client is None else client]
    if handoffs is not None:
        watched.append(handoffs)
    for ready in select.select(watched, [], [], 0.05)[0]:
        if ready is handoffs:
            take_handoff()
        elif ready is control:
            client, _ = control.accept()
        else:
            data = client.recv(65536)
            if not data:
                client.close()
                client, buffered = None, b''
                continue
            buffered += data
            while b'\n' in buffered:
                line, buffered = buffered.split(b'\n', 1)
                client.sendall(json.dumps(answer(line.decode())).encode()
                               + b'\n')
'''


def write(directory):
    """The fake pager and QEMU as executables in ``directory``:
    (pager, qemu)."""
    paths = []
    for name, text in (('memcanal-pager', FAKE_PAGER),
                       ('qemu-system-x86_64', FAKE_QEMU)):
        path = os.path.join(directory, name)
        with open(path, 'w') as script:
            script.write(text % {'python': sys.executable})
        os.chmod(path, 0o755)
        paths.append(path)
    return paths
