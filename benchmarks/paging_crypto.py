"""What sealing pages costs (issue #25): fault latency and swap-out rate
of memcanal-pager with its copies AES-256-GCM sealed (--key-file) and in
plaintext, per store the faults come from: the pool, the local file, a
memory server over TLS. Goal: < 10 % on fault p50.

    bash tools/build-test-guest.sh       # once
    sudo flock /tmp/memcanal-guest.lock .venv/bin/python \\
        benchmarks/paging_crypto.py [--rounds 3]

Each boot is test_guest_paging.py's page check (the test guest, 256 MiB,
TCG, the shim; 96 MiB of random data written and md5summed in a tmpfs):
every resident page swapped out, then the guest's md5sum -c faults its
data back. The first place a fault looks is the one measured: a 512 MiB
pool (anonymous; every page swapped out stays in it), else the file
store, else the memory server (TLS and a lease token either way: only
the pages' sealing differs). Boots alternate sealed and plaintext, store
by store, so the drift of a shared machine falls on both.

Fault latency is the pager's service time of each fault (reading it from
the uffd to the UFFDIO_COPY that wakes the guest: the get, the opening
of the copy, the copy in), p50 and p99 of each boot's faults from that
source; swap-out MB/s is the pager's (pages dropped over the time
pager_swap_out took: reading the memfd, sealing, every store's put).
Medians over the rounds. Exits 1 if a check fails, a page is lost, or
a copy is refused (nobody attacks here).
"""

import argparse
import os
import pathlib
import statistics
import sys
import tempfile

from memcanal.tests.functional import services
from memcanal.tests.functional import test_guest_paging as paging

STORES = {'pool': 'pool', 'file': 'file', 'memory server (TLS)': 'tcp'}
POOL_MB = 512


def boot(build, guest, initrd, scratch, store, sealed):
    """One page check: the swap-out and what the faults of ``store``
    cost, sealed or not."""
    vm = paging.PagedGuest(
        build, guest, initrd, scratch, sealed=sealed, tls=True,
        memserver=store == 'memory server (TLS)',
        options=['--pool-mb', str(POOL_MB)] if store == 'pool' else [])
    try:
        out = vm.pager.command('swapout 0 %d' % paging.PAGES, 'swapout')
        vm.check()
        verdict = paging.wait_line(vm.console, 'pagecheck: (ok|BAD)', 300,
                                   vm.seen)
        stats = vm.pager.command('stats', 'stats')
    finally:
        vm.stop()
    source = stats['sources'][STORES[store]]
    return dict(ok='pagecheck: ok' in verdict and stats['lost'] == 0
                and not any(stats['bad_sum']) and not stats['pool_bad']
                and stats['sealed'] == sealed,
                mb_s=out['mb_per_s'], dropped=out['dropped'],
                faults=source['faults'], p50=source['p50_us'],
                p99=source['p99_us'])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--rounds', type=int, default=3,
                        help='boots of each store, sealed and plaintext')
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit('needs root: userfaultfd on shmem')
    results = {(store, sealed): [] for store in STORES
               for sealed in (False, True)}
    with tempfile.TemporaryDirectory(prefix='pc-', dir='/tmp') as scratch:
        build = services.build_pager(pathlib.Path(scratch) / 'build')
        guest = services.require_test_guest()
        initrd = paging.pagecheck_initrd(
            guest, pathlib.Path(scratch) / 'initrd.gz')
        for round_ in range(args.rounds):
            for store in STORES:
                # Which goes first alternates too.
                for sealed in ((False, True) if round_ % 2 else
                               (True, False)):
                    run = tempfile.mkdtemp(dir=scratch)
                    result = boot(build, guest, initrd, run, store, sealed)
                    results[store, sealed].append(result)
                    print('%-20s %-9s %s' % (
                        store, 'sealed' if sealed else 'plaintext',
                        result), flush=True)
    return 0 if report(results) else 1


def median(runs, key):
    return statistics.median(run[key] for run in runs)


def report(results):
    print('\nmemcanal-pager, test guest (256 MiB, TCG), 96 MiB faulted '
          'back by md5sum; medians of %d boots\n' % len(
              next(iter(results.values()))))
    print('| faults from | fault p50 plaintext / sealed (us) | change | '
          'fault p99 plaintext / sealed (us) | swap-out MB/s plaintext / '
          'sealed |')
    print('| --- | --- | --- | --- | --- |')
    ok = True
    for store in STORES:
        plain, sealed = results[store, False], results[store, True]
        ok &= all(run['ok'] for run in plain + sealed)
        p50 = (median(plain, 'p50'), median(sealed, 'p50'))
        print('| %s (%d faults) | %.1f / %.1f | %+.1f %% | %.1f / %.1f | '
              '%.0f / %.0f |' % (
                  store, median(sealed, 'faults'), p50[0], p50[1],
                  100 * (p50[1] / p50[0] - 1), median(plain, 'p99'),
                  median(sealed, 'p99'), median(plain, 'mb_s'),
                  median(sealed, 'mb_s')))
    print('\nevery check ok, nothing lost or refused: %s' % ok)
    return ok


if __name__ == '__main__':
    sys.exit(main())
