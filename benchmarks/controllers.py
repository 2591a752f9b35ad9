"""Several memcanal-service processes: what each costs and what they do
to decisions, with and without coordination (issue #37).

Runs 1, 2 and 3 memcanal-service processes against one MariaDB (a scratch
database per run), one RabbitMQ virtual host and, unless
``--backend none``, Redis as the tooz backend, with six simulated hosts
of four VMs (memcanal-aio's cloud: a small first host that migrations
and memory pooling relieve, file servers the optimizer resizes) in a
process of their own (memcanal/tests/functional/controllers.py). In
``auto`` mode it counts what the agents received twice and pairs of
decisions carried out at once on a host; in ``recommend`` mode an
operator approves the oldest waiting recommendation every
``--approve-every`` seconds, and it measures how long recommendations
wait before something replaces them and how often the approval meets
HostBusy. Optimizer CPU is the thread CPU of the optimizer's runs (the
controllers log it), summed over the processes and scaled to 300 s.

    flock /tmp/memcanal-guest.lock .venv/bin/python benchmarks/controllers.py \
        --processes 1 2 3 --modes auto recommend --duration 60

Needs MariaDB, RabbitMQ and Redis on loopback (tools/start-services.sh);
MEMCANAL_TEST_RABBIT_URL / _MYSQL_URL / _REDIS_URL override where.
"""

import argparse
import os
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))

from memcanal.db import decisions as decisions_db  # noqa: E402
from memcanal.db import transitions  # noqa: E402
from memcanal import exception  # noqa: E402
from memcanal.tests import fixtures as memcanal_fixtures  # noqa: E402
from memcanal.tests.functional import controllers  # noqa: E402
from memcanal.tests.functional import services  # noqa: E402


class Operator:
    """Approves the oldest recommendation every ``every`` seconds and
    counts what the approvals met."""

    def __init__(self, every):
        self.every = every
        self.outcomes = {'approved': 0, 'host_busy': 0, 'conflict': 0}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        context = controllers.admin()
        while not self.stop.wait(self.every):
            waiting = decisions_db.list_decisions(context,
                                                  state='recommended')
            if not waiting:
                continue
            try:
                transitions.request_transition(
                    context, waiting[-1]['uuid'], 'approve')
                self.outcomes['approved'] += 1
            except exception.HostBusy:
                self.outcomes['host_busy'] += 1
            except (exception.DecisionStateConflict,
                    exception.DecisionNotFound):
                self.outcomes['conflict'] += 1


def run(args, processes, mode, state_dir):
    urls = services.mysql_database()
    db_url = next(urls)
    database = memcanal_fixtures.Database(db_url, migrate=True)
    database.setUp()
    backend = None if args.backend == 'none' else args.backend
    cloud = controllers.Cloud(
        state_dir, db_url, services.require_rabbit(), backend,
        hosts=args.hosts, vms=args.vms,
        optimize_interval=args.optimize_interval, mode=mode)
    context = controllers.admin()
    operator = Operator(args.approve_every)
    try:
        for index in range(processes):
            cloud.start_controller(index)
        cloud.start_agents()
        controllers.wait(lambda: controllers.enable_memory_servers(
            context) or len(controllers.pooling_db.list_memory_servers(
                context)) == args.hosts, 120)
        controllers.enable_memory_servers(context)
        if mode == 'recommend':
            operator.thread.start()
        started = time.monotonic()
        time.sleep(args.duration)
        elapsed = time.monotonic() - started
        operator.stop.set()
        runs = cloud.optimizer_runs()
        cpu = sum(seconds for made in runs.values() for _, seconds in made)
        lifetimes, waiting = controllers.recommendation_lifetimes(context)
        return {
            'processes': processes, 'mode': mode, 'seconds': elapsed,
            'optimizer_runs': sum(len(made) for made in runs.values()),
            'optimizer_cpu_per_300s': cpu * 300.0 / elapsed,
            'duplicate_sends': cloud.duplicate_sends(),
            'overlapping': len(controllers.overlapping_decisions(context)),
            'states': dict(controllers.state_counts(context)),
            # Until something replaced them: the churn of #37.
            'superseded_median_s': controllers.median(
                lifetimes['superseded']),
            'superseded': len(lifetimes['superseded']),
            'recommendation_median_s': controllers.median(
                [t for times in lifetimes.values() for t in times]),
            'recommendations_waiting': waiting,
            'approvals': dict(operator.outcomes),
            'reports': controllers.stored_reports(context),
        }
    finally:
        operator.stop.set()
        cloud.stop()
        database.cleanUp()
        urls.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--processes', type=int, nargs='+',
                        default=[1, 2, 3])
    parser.add_argument('--modes', nargs='+', default=['auto', 'recommend'],
                        choices=['auto', 'recommend'])
    parser.add_argument('--duration', type=float, default=60.0,
                        help='seconds each run is measured (the issue ran '
                             '300)')
    parser.add_argument('--backend', default=services.REDIS_URL,
                        help='tooz backend URL, or "none" for every '
                             'process running every job (before #37)')
    parser.add_argument('--hosts', type=int, default=6)
    parser.add_argument('--vms', type=int, default=4)
    parser.add_argument('--optimize-interval', type=float, default=4.0)
    parser.add_argument('--approve-every', type=float, default=3.0)
    args = parser.parse_args()
    if args.backend != 'none':
        services.require_redis()
    print('backend %s, %d hosts x %d VMs, optimize every %gs, %gs a run'
          % (args.backend, args.hosts, args.vms, args.optimize_interval,
             args.duration))
    print('procs  mode       opt runs  opt CPU s/300s  dup sends  '
          'overlaps  superseded (median s)  waiting  approvals ok/busy/'
          'conflict  reports')
    for mode in args.modes:
        for processes in args.processes:
            with tempfile.TemporaryDirectory() as state_dir:
                r = run(args, processes, mode, state_dir)
            median = r['superseded_median_s']
            print('%5d  %-9s  %8d  %14.2f  %9d  %8d  %10d (%6s)  %7d  '
                  '%20s  %7d' % (
                      r['processes'], r['mode'], r['optimizer_runs'],
                      r['optimizer_cpu_per_300s'], r['duplicate_sends'],
                      r['overlapping'], r['superseded'],
                      '-' if median is None else '%.1f' % median,
                      r['recommendations_waiting'],
                      '%(approved)d/%(host_busy)d/%(conflict)d'
                      % r['approvals'], r['reports']), flush=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
