"""memcanal-memserver under load, and what TLS costs (issue #25).

    sudo flock /tmp/memcanal-guest.lock .venv/bin/python \\
        benchmarks/memserver_load.py [--rounds 5] [--seconds 10]

Both parts drive the server through the pager's own stores
(hypervisor-patches/pager/store_tcp.c, store_tls.c) with memserver-client
(hypervisor-patches/memserver), on loopback:

- TLS against plaintext: one client, 16-page PUTs and 1-page GETs (a
  fault's), on a TLS server with a lease token and on an --insecure one,
  --rounds runs of 3 s each, taken in turn (this machine is shared: the
  median of each column is printed).
- 1,000 idle connections (plain TCP, never a byte) and then 100 busy
  clients, each its own lease, 16-page PUTs and 1-page GETs for
  --seconds, on a server of --capacity pages with the default
  --max-connections 256: the server's resident memory (before, peak)
  and threads and descriptors (peak) from /proc, sampled every 50 ms,
  and the clients' pages/s.
"""

import argparse
import base64
import os
import re
import statistics
import subprocess
import tempfile
import threading
import uuid

from memcanal.agent import paging
from memcanal.tests.functional import memservers
from memcanal.tests.functional import services

CLIENT = os.path.join(services.MEMSERVER_SOURCE, 'memserver-client')


def process_status(pid):
    """(resident KiB, threads, open descriptors) of process pid."""
    fields = {}
    for line in open('/proc/%d/status' % pid):
        key, _, value = line.partition(':')
        fields[key] = value.split()
    return (int(fields['VmRSS'][0]), int(fields['Threads'][0]),
            len(os.listdir('/proc/%d/fd' % pid)))


class Peak:
    """The peak (resident KiB, threads, descriptors) of process pid,
    sampled every 50 ms while in the with block."""

    def __init__(self, pid):
        self.pid = pid
        self.samples = [process_status(pid)]
        self.done = threading.Event()
        self.watcher = threading.Thread(target=self.watch)

    def watch(self):
        while not self.done.wait(0.05):
            self.samples.append(process_status(self.pid))

    def __enter__(self):
        self.watcher.start()
        return self

    def __exit__(self, *exc_info):
        self.done.set()
        self.watcher.join()

    def peak(self):
        return tuple(max(column) for column in zip(*self.samples))


def bench(store, args, tokens=None, ca=None):
    """memserver-client bench's report."""
    command = [CLIENT, '--store', store]
    if tokens:
        command += ['--tokens', tokens, '--ca', ca]
    return subprocess.run(command + args + ['bench'], capture_output=True,
                          text=True, check=True).stdout


def leases(server, directory, count, quota_pages):
    """A --tokens file of count leases, each its own VM's."""
    path = os.path.join(directory, 'tokens')
    with open(path, 'w') as out:
        for _ in range(count):
            owner = paging.owner_of(str(uuid.uuid4()))
            out.write(base64.b64encode(
                server.token(owner, quota_pages)).decode() + '\n')
    return path


REPORT = re.compile(r'(PUT|GET): \d+ pages/s, ([\d.]+) MB/s; latency p50 '
                    r'([\d.]+) us p99 ([\d.]+) us')


def figures(report):
    """(MB/s, PUT p50, PUT p99, GET p50, GET p99) of a bench report."""
    found = {kind: numbers for kind, *numbers in REPORT.findall(report)}
    return tuple(float(x) for x in (found['PUT'][0], *found['PUT'][1:],
                                    *found['GET'][1:]))


def tls_against_plaintext(directory, seconds, rounds):
    args = ['--threads', '1', '--seconds', str(seconds)]
    server = memservers.Memserver(os.path.join(directory, 'tls'), 65536)
    process, address = services.start_memserver(65536)
    tokens = leases(server, directory, 1, 65536)
    runs = {'tls': [], 'tcp (--insecure)': []}
    try:
        for _ in range(rounds):
            runs['tls'].append(figures(bench(
                'tls:' + server.name, args, tokens, server.ca)))
            runs['tcp (--insecure)'].append(figures(bench(
                'tcp:%s:%d' % address, args)))
    finally:
        server.stop()
        process.terminate()
        process.wait(10)
    print('one client, %d x %d s, medians: MB/s of the PUT+GET loop; '
          '16-page PUT and 1-page GET latency, us' % (rounds, seconds))
    for name, rows in runs.items():
        print('%-17s %6.1f MB/s  PUT p50 %6.1f p99 %6.1f  GET p50 %5.1f '
              'p99 %6.1f' % ((name,) + tuple(
                  statistics.median(column) for column in zip(*rows))))


def idle_and_busy(directory, seconds, capacity):
    os.mkdir(os.path.join(directory, 'load'))
    server = memservers.Memserver(os.path.join(directory, 'load'),
                                  capacity)
    try:
        before = process_status(server.process.pid)
        tokens = leases(server, directory, 100, capacity // 100)
        with Peak(server.process.pid) as peak:
            print(bench('tls:' + server.name,
                        ['--threads', '100', '--idle', '1000', '--seconds',
                         str(seconds)], tokens, server.ca))
        kib, threads, fds = peak.peak()
        print('server: --max-pages %d (%d KiB), resident %d KiB before, '
              '%d KiB at most: %d KiB over the arena and what it had; '
              'threads %d, descriptors %d at most' % (
                  capacity, capacity * 4, before[0], kib,
                  kib - before[0] - capacity * 4, threads, fds))
    finally:
        server.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--seconds', type=int, default=10)
    parser.add_argument('--rounds', type=int, default=5)
    parser.add_argument('--capacity', type=int, default=65536,
                        help='the loaded server\'s --max-pages')
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        os.mkdir(os.path.join(directory, 'tls'))
        tls_against_plaintext(directory, 3, args.rounds)
        idle_and_busy(directory, args.seconds, args.capacity)


if __name__ == '__main__':
    main()
