"""How fast a pooling action frees a hot node's cold memory, and what the
pooled VM pays for it afterwards (issue #35).

    bash tools/build-test-guest.sh       # once; and tools/install-libvirt.sh
    sudo flock /tmp/memcanal-guest.lock .venv/bin/python \\
        benchmarks/pooling_speed.py [--data-mb 64] [--target-mb 64]

One run on the production path: the test guest as a domain of the
host's libvirtd (TCG, its RAM handed to a memcanal-pager by the shim),
sampled by the libvirt driver as test_libvirt_sampling.py runs it (its
fixtures: 10 % sample, 1 s intervals, a full pass every 2, cold after
2 s). The guest writes --data-mb MiB of random data (the known cold
set) and then loops over a 32 MiB array (the hot loop) for ever. Once
the driver's detector holds the data cold, the benchmark does what the
agent does for a pooling `page` action: ``apply_memory_target(uuid,
target, 'paging', [tls:server], {server: token})`` with a TLS memory
server on loopback (memservers.py: a tools/pki.sh certificate, a lease
token signed by a test service key). Measured in the same run:

- ``pageout_mib_s``: MiB the action dropped over the action's time (the
  agent's and the pager's); ``freed_s``: from the action's start until
  the guest's memfds (sampled every 5 ms) hold 95 % less of what the
  action freed in the end;
- ``fault_p50_us``, ``fault_p99_us``: the pager's service time of the
  faults answered by the memory server (from reading the fault to the
  UFFDIO_COPY that wakes the guest) while the guest's md5sum reads its
  data back; the local store's copies are removed first where it has
  any, so the faults go over TLS. ``check_s``: that md5sum's time, as
  the guest saw it. ``lost`` must be 0 and the check pass;
- ``pager_alone_mib_s``: the same pages, back in after the check, swapped
  out by the pager alone (its ``swapout`` commands sent straight to its
  control socket, no agent): what its own swap-out time allows;
- ``tls_put_mib_s``, ``tls_get_p50_us``: memserver-client's bench
  (benchmarks/memserver_load.py, the pager's own TLS store code) on the
  same server: what loopback TLS allows on this machine;
- ``breakdown``: where the action's time went, agent side (the
  detector's cold pages, the memfds' resident pages, the pager's
  commands) and pager side (its swap-out phases: mark, read, seal, put
  to each store, validate).

The last line is one JSON object of all of it. Exits 1 if the check
fails or a page is lost.
"""

import argparse
import collections
import contextlib
import json
import os
import sys
import tempfile
import time

import numpy as np

from memcanal.agent import paging
from memcanal.tests import fixtures as memcanal_fixtures
from memcanal.tests.functional import guests
from memcanal.tests.functional import memservers
from memcanal.tests.functional import test_libvirt_sampling as sampling

import memserver_load

MiB = 2 ** 20
PAGES_PER_MIB = MiB // paging.PAGE


class Timers:
    """Seconds and calls per name, of the methods wrapped."""

    def __init__(self):
        self.seconds = collections.Counter()
        self.calls = collections.Counter()

    def wrap(self, owner, method, name=None):
        inner = getattr(owner, method)
        name = name or method

        def timed(*args, **kwargs):
            started = time.monotonic()
            try:
                return inner(*args, **kwargs)
            finally:
                self.seconds[name] += time.monotonic() - started
                self.calls[name] += 1
        setattr(owner, method, timed)

    def report(self):
        return {name: {'s': round(self.seconds[name], 3),
                       'calls': self.calls[name]} for name in self.seconds}


class Freed(memserver_load.Watcher):
    """The guest's memfd KiB every 5 ms while in the with block, with
    when each was read."""

    period = 0.005

    def __init__(self, memfds):
        super().__init__()
        self.memfds = memfds

    def sample(self):
        return (time.monotonic(),
                sum(os.fstat(fd).st_blocks // 2 for fd in self.memfds))

    def freed_s(self, started, share=0.95):
        """Seconds from ``started`` until ``share`` of what was freed
        in the end was."""
        before, after = self.samples[0][1], self.samples[-1][1]
        goal = before - share * (before - after)
        return next(t for t, kib in self.samples if kib <= goal) - started


def delta(after, before, keys):
    return {key: round(after[key] - before[key], 1) for key in keys}


def pager_phases(before, after):
    """The pager's swap-out phases between two stats, ms."""
    phases = delta(after['swapout_ms'], before['swapout_ms'],
                   after['swapout_ms'])
    phases['put_by_store'] = [round(a - b, 1) for a, b in zip(
        after['put_ms'], before['put_ms'] + [0] * len(after['put_ms']))]
    return phases


def remove_local_copies(pager):
    """Empty the local store's file, if the VM has one: its faults must
    go to the memory server."""
    for store in pager.record.stores:
        if store.startswith('file:') and os.path.exists(store[5:]):
            os.truncate(store[5:], 0)


def check(host):
    """The guest's md5sum of its data: (ok, seconds)."""
    started = time.monotonic()
    host.console.send('check')
    verdict = host.console.wait('pagecheck: (ok|BAD)')
    return 'pagecheck: ok' in verdict, time.monotonic() - started


def tls_limits(server, directory):
    """memserver-client's bench on ``server``: (PUT MiB/s, GET p50 us)."""
    tokens = memserver_load.leases(server, directory, 1, 65536)
    report = memserver_load.bench(
        'tls:' + server.name, ['--threads', '1', '--seconds', '3',
                               '--batch', '512', '--span', '16384'],
        tokens, server.ca)
    put_mb_s, _, _, get_p50, _ = memserver_load.figures(report)
    return put_mb_s * 1e6 / MiB, get_p50


def page_out(host, server, target_bytes, timers):
    """The pooling action, timed: (Resize, seconds to free, dropped
    pages, the pages asked out, the pager's stats before and after)."""
    pager = host.pager()
    guest = pager.guest
    for method in ('cold', 'resident', '_swap_out', '_prefetch'):
        timers.wrap(guest, method)
    timers.wrap(guest.client, 'commands', 'pager_commands')
    timers.wrap(guest.detector, 'observe', 'detector_observe')
    timers.wrap(pager, 'add_stores')
    asked = []
    swap_out = guest._swap_out

    def recording(pages):
        asked.append(np.array(pages))
        return swap_out(pages)
    guest._swap_out = recording
    stores, tokens = sampling.lent(server, host.uuid)
    before = pager.client.command('stats')
    with Freed(guest.memfds) as freed:
        started = time.monotonic()
        resize = host.hypervisor.apply_memory_target(
            host.uuid, target_bytes, 'paging', stores, tokens)
        ended = time.monotonic()
        time.sleep(0.05)
    guest._swap_out = swap_out
    after = pager.client.command('stats')
    dropped = after['swapped_out'] - before['swapped_out']
    local = [store[5:] for store in pager.record.stores
             if store.startswith('file:')]
    return dict(resize=resize, seconds=ended - started,
                local_mib=sum(os.stat(path).st_blocks // 2 for path in local
                              if os.path.exists(path)) / 1024,
                freed_s=freed.freed_s(started), dropped=dropped,
                pages=np.concatenate(asked or [np.empty(0, np.int64)]),
                before=before, after=after)


def pager_alone(pager, pages):
    """The pages swapped out by the pager alone: (dropped, its own
    swap-out seconds, the commands' wall seconds, stats before, after)."""
    before = pager.client.command('stats')
    started = time.monotonic()
    answers = pager.client.commands(
        paging.swapoutv_lines(paging.runs(pages)))
    wall = time.monotonic() - started
    after = pager.client.command('stats')
    return (sum(a['dropped'] for a in answers),
            sum(a['seconds'] for a in answers), wall, before, after)


@contextlib.contextmanager
def guest_setup(args, scratch, max_pages=4 * sampling.GUEST_MB * 256):
    """The agent's options, a TLS memory server of ``max_pages`` whose
    CA they name, the guest's files (writing --data-mb, then the hot
    loop) and a connection to libvirtd: (conf, server, files,
    connection); migration_cost.py's too."""
    conf_fixture = memcanal_fixtures.ConfFixture()
    conf_fixture.setUp()
    conf = conf_fixture.conf
    directory = os.path.join(scratch, 'memserver')
    os.mkdir(directory)
    server = memservers.Memserver(directory, max_pages)
    conf.set_override('tls_ca_file', server.ca, 'pooling')
    init = (guests.writes_data(args.data_mb)
            + guests.hot_loop_and_checks(sampling.HOT_MB))
    files = sampling.prepare(conf, scratch, init)
    connect = contextlib.contextmanager(guests.libvirt_connection)
    try:
        with connect() as connection:
            yield conf, server, files, connection
    finally:
        server.stop()
        conf_fixture.cleanUp()


def guest_options(parser):
    """The guest's options (migration_cost.py's too)."""
    parser.add_argument('--data-mb', type=int, default=sampling.DATA_MB,
                        help='the guest\'s cold set (MiB of random data)')
    parser.add_argument('--target-mb', type=int, default=sampling.TARGET_MB,
                        help='the resident target of the pooling action')


def in_scratch(run, args):
    """``run(args, scratch)`` as root, in a scratch directory libvirt's
    QEMU can read."""
    if os.geteuid() != 0:
        sys.exit('needs root: libvirtd, userfaultfd on shmem')
    with tempfile.TemporaryDirectory(prefix='mc-') as scratch:
        os.chmod(scratch, 0o755)
        return run(args, scratch)


def run(args, scratch):
    timers = Timers()
    with guest_setup(args, scratch) as (conf, server, files, connection):
        with sampling.booted(
                conf, scratch, connection, files, 'bench') as host:
            waited = time.monotonic()
            sampling.wait_cold(host)
            waited = time.monotonic() - waited
            put_mib_s, get_p50 = tls_limits(
                server, os.path.join(scratch, 'memserver'))
            out = page_out(host, server, args.target_mb * MiB, timers)
            pager = host.pager()
            remove_local_copies(pager)
            ok, check_s = check(host)
            checked = pager.client.command('stats')
            hello = pager.client.command('hello')
            alone = pager_alone(pager, out['pages'])
            ok_again, _ = check(host)
            final = pager.client.command('stats')
    dropped_mib = out['dropped'] / PAGES_PER_MIB
    tcp = checked['sources']['tcp']
    action_s = out['resize'].seconds
    result = {
        'pageout_mib_s': round(dropped_mib / action_s, 1),
        'pager_alone_mib_s': round(
            alone[0] / PAGES_PER_MIB / alone[1], 1) if alone[1] else None,
        'pager_alone_wall_mib_s': round(
            alone[0] / PAGES_PER_MIB / alone[2], 1),
        'freed_s': round(out['freed_s'], 3),
        'action_s': round(action_s, 3),
        'dropped_mib': round(dropped_mib, 1),
        'asked_runs': len(paging.runs(out['pages'])),
        'fault_p50_us': tcp['p50_us'],
        'fault_p99_us': tcp['p99_us'],
        'tls_faults': tcp['faults'],
        'check_s': round(check_s, 2),
        'check_ok': ok and ok_again,
        'lost': final['lost'],
        'tls_put_mib_s': round(put_mib_s, 1),
        'tls_get_p50_us': get_p50,
        'cold_wait_s': round(waited, 1),
        'stores': pager.record.stores,
        'swap_to': hello['swap_to'],
        'local_store_mib': round(out['local_mib'], 1),
        'breakdown': {
            'agent': timers.report(),
            'pager_ms': pager_phases(out['before'], out['after']),
            'pager_alone_ms': pager_phases(alone[3], alone[4]),
        },
    }
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    guest_options(parser)
    result = in_scratch(run, parser.parse_args())
    for key, value in result.items():
        if key != 'breakdown':
            print('%-24s %s' % (key, value))
    print('breakdown', json.dumps(result['breakdown'], indent=1))
    print(json.dumps(result))
    sys.exit(0 if result['check_ok'] and result['lost'] == 0 else 1)


if __name__ == '__main__':
    main()
