"""Remote paging under faults (issue #17): a memory server killed
mid-run, the pager killed and restarted, and the guest's own check of its
data; with fault latency per source (pool, local file, memory server).

    bash tools/build-test-guest.sh       # once
    sudo .venv/bin/python benchmarks/paging_faults.py [--runs 2]

Each run boots the test guest (256 MiB, QEMU TCG, RAM in a shared memfd,
the libmemcanal-uffd.so shim) into its page check, as
memcanal/tests/functional/test_guest_paging.py does: it writes 96 MiB of
random data into a tmpfs and notes its md5sum. memcanal-pager pages it
with a state file (--state), a 16 MiB pool (--pool-mb) and two stores, a
memcanal-memserver first and a local file second. Two scenarios a run:

- memory server killed: every page swapped out, the memory server
  SIGKILLed, the guest's check (every page faults back: from the pool,
  else the file once the server is found dead);
- pager killed: SIGKILLed a third of the way through swapping every page
  out, a new pager takes over (the shim hands it the uffd again), the
  swap-out finished, the check started, the pager SIGKILLed again once
  2,000 pages faulted back, a third pager takes over on another socket
  (pidfd_getfd from QEMU), the check finishes.

Prints, per scenario and run: pages out once every page was swapped
out and MB/s over the wall time it took (a takeover included), pages
cancelled by validate, QEMU's RssShmem before and paged, the check's
verdict, pages lost, faults and p50/p99 per source, and the takeover
time (a new pager started to attached). Exits 1 if a check fails or a
page is lost: TMemCanal keeps remote pages redundantly for exactly this
("the external servers can reclaim the shared storage space at any
moment"), and a pager's death must never let the guest read zeros.
"""

import argparse
import os
import pathlib
import signal
import sys
import tempfile
import time

from memcanal.tests.functional import services
from memcanal.tests.functional import test_guest_paging as paging

POOL_MB = 16
REFAULTED = 2000


def boot(build, guest, initrd, scratch):
    return paging.PagedGuest(build, guest, initrd, scratch, options=[
        '--state', os.path.join(scratch, 'pager.state'),
        '--pool-mb', str(POOL_MB)])


def swap_out_all(vm):
    started = time.monotonic()
    out = vm.pager.command('swapout 0 %d' % paging.PAGES, 'swapout')
    return out, time.monotonic() - started


def verdict(vm):
    line = paging.wait_line(vm.console, 'pagecheck: (ok|BAD)', 300, vm.seen)
    return 'ok' if 'pagecheck: ok' in line else 'BAD'


def take_over(vm, socket=None):
    started = time.monotonic()
    attached = vm.restart_pager(socket)
    return attached, time.monotonic() - started


def server_killed(build, guest, initrd, scratch):
    vm = boot(build, guest, initrd, scratch)
    try:
        before = paging.rss_shmem_kib(vm.vm.pid)
        out, seconds = swap_out_all(vm)
        paged = paging.rss_shmem_kib(vm.vm.pid)
        vm.server.send_signal(signal.SIGKILL)
        vm.server.wait(10)
        vm.check()
        result = verdict(vm)
        stats = vm.pager.command('stats', 'stats')
        return {'scenario': 'memory server killed', 'out': out,
                'seconds': seconds, 'before_kib': before,
                'paged_kib': paged, 'verdict': result, 'stats': stats,
                'takeovers': []}
    finally:
        vm.stop()


def pager_killed(build, guest, initrd, scratch):
    vm = boot(build, guest, initrd, scratch)
    try:
        before = paging.rss_shmem_kib(vm.vm.pid)
        started = time.monotonic()
        vm.pager.process.stdin.write('swapout 0 %d\n' % paging.PAGES)
        vm.pager.process.stdin.flush()
        while paging.rss_shmem_kib(vm.vm.pid) > before - (
                paging.DATA_MB * 1024 // 3):
            time.sleep(0.02)
        vm.kill_pager()
        takeovers = [take_over(vm)[1]]
        out = vm.pager.command('swapout 0 %d' % paging.PAGES, 'swapout')
        seconds = time.monotonic() - started
        paged = paging.rss_shmem_kib(vm.vm.pid)
        vm.check()
        stats = out
        while paging.store_faults(stats) < REFAULTED:
            stats = vm.pager.command('stats', 'stats')
            time.sleep(0.02)
        vm.kill_pager()
        takeovers.append(take_over(vm, os.path.join(scratch, 'other.sock'))[1])
        result = verdict(vm)
        stats = vm.pager.command('stats', 'stats')
        return {'scenario': 'pager killed twice', 'out': out,
                'seconds': seconds, 'before_kib': before,
                'paged_kib': paged, 'verdict': result, 'stats': stats,
                'takeovers': takeovers}
    finally:
        vm.stop()


def _us(value):
    return '%.1f' % value if value is not None else '-'


def report(results):
    print('%-22s %7s %7s %9s %16s %6s %5s  %-36s %s' % (
        'scenario', 'out', 'MB/s', 'cancelled', 'RssShmem KiB', 'check',
        'lost', 'faults p50/p99 us: pool | file | tcp', 'takeover s'))
    for r in results:
        stats, out = r['stats'], r['out']
        sources = ' | '.join('%d %s/%s' % (
            stats['sources'][name]['faults'],
            _us(stats['sources'][name]['p50_us']),
            _us(stats['sources'][name]['p99_us']))
            for name in ('pool', 'file', 'tcp'))
        print('%-22s %7d %7.0f %9d %7d->%-7d %6s %5d  %-36s %s' % (
            r['scenario'], out['out_pages'],
            out['out_pages'] * 4096 / 1e6 / max(r['seconds'], 1e-9),
            stats.get('cancelled', 0), r['before_kib'], r['paged_kib'],
            r['verdict'], stats['lost'], sources,
            ', '.join('%.2f' % s for s in r['takeovers']) or '-'))
    print('TMemCanal: remote pages kept redundantly (a server may reclaim '
          'them at any moment); here every page is in a memory server and '
          'a local file, and a dead pager leaves the guest waiting, never '
          'reading zeros')


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--runs', type=int, default=2)
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit('userfaultfd on the guest needs root')
    guest = services.require_test_guest()
    results = []
    with tempfile.TemporaryDirectory(prefix='mc-faults-',
                                     dir='/tmp') as scratch:
        scratch = pathlib.Path(scratch)
        build = services.build_pager(scratch / 'build')
        initrd = paging.pagecheck_initrd(guest, scratch / 'initrd.gz')
        for run in range(args.runs):
            for scenario in (server_killed, pager_killed):
                place = scratch / ('%s-%d' % (scenario.__name__, run))
                place.mkdir()
                results.append(scenario(build, guest, initrd, str(place)))
                print('run %d: %s: check %s, lost %d' % (
                    run + 1, results[-1]['scenario'], results[-1]['verdict'],
                    results[-1]['stats']['lost']), flush=True)
    report(results)
    bad = [r for r in results
           if r['verdict'] != 'ok' or r['stats']['lost']]
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
