"""What one Prometheus scrape of the API's GET /metrics costs.

Fills a SQLite file with ``--hosts`` (100) hosts of ``--vms`` (10) VMs
each, ``--reports`` (5) reports per host, every VM with three working-set
estimators and a ``--curve-points`` (64) point curve, registered and
stored through memcanal.db.api as the service does; then scrapes
``GET /metrics`` through the API's WSGI application ``--scrapes`` (5)
times and prints the median time, the size of the text and its number of
series, with and without the per-VM series ([api]
metrics_per_instance).

    python benchmarks/metrics_scrape.py [--hosts 100] [--vms 10]
        [--reports 5] [--reduced]

``--reduced`` (CI): 5 hosts of 4 VMs.
"""

import argparse
import logging
import os
import statistics
import sys
import tempfile
import time
import uuid

from prometheus_client import parser
import webob

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))

from memcanal.api import deploy  # noqa: E402
from memcanal.cmd import common  # noqa: E402
from memcanal import context as memcanal_context  # noqa: E402
from memcanal.db import api as db_api  # noqa: E402
from memcanal.db import migration  # noqa: E402
from memcanal.rpc import reports as rpc_reports  # noqa: E402

GIB = 2 ** 30


def report(host_uuid, sequence, vms, curve_points):
    curve = [[(i + 1) * GIB // curve_points, 1.0 - i / curve_points]
             for i in range(curve_points)]
    return rpc_reports.validate_report({
        'host_uuid': host_uuid, 'sequence': sequence,
        'collected_at': '2026-12-02T08:%02d:00Z' % (sequence % 60),
        'instances': [{
            'uuid': vm, 'project_id': 'project-%d' % (index % 7),
            'allocated_bytes': 4 * GIB, 'observed_bytes': 4 * GIB,
            'wss': {'distinct': GIB, 'ewma': GIB, 'prl': GIB},
            'mrc': {'shards_fixed_rate': curve},
            'guest_stats': {'references': 1000.0}}
            for index, vm in enumerate(vms)]},
        max_mrc_points=256, max_instances=1024)


def fill(args):
    ctx = memcanal_context.get_admin_context()
    for host in range(args.hosts):
        host_uuid = db_api.register_host(
            ctx, 'compute-%04d' % host, 256 * GIB, 8 * GIB, 60.0)['uuid']
        vms = [str(uuid.uuid4()) for _ in range(args.vms)]
        for sequence in range(1, args.reports + 1):
            db_api.store_report(ctx, report(host_uuid, sequence, vms,
                                            args.curve_points))


def scrape(app, times):
    """(median seconds, bytes, series) of ``times`` scrapes."""
    seconds = []
    for _ in range(times):
        started = time.perf_counter()
        response = webob.Request.blank('/metrics').get_response(app)
        seconds.append(time.perf_counter() - started)
        assert response.status_int == 200, response.body
    series = sum(len(family.samples) for family in
                 parser.text_string_to_metric_families(response.text))
    return statistics.median(seconds), len(response.body), series


def main():
    parser_ = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser_.add_argument('--hosts', type=int, default=100)
    parser_.add_argument('--vms', type=int, default=10)
    parser_.add_argument('--reports', type=int, default=5)
    parser_.add_argument('--curve-points', type=int, default=64)
    parser_.add_argument('--scrapes', type=int, default=5)
    parser_.add_argument('--reduced', action='store_true')
    args = parser_.parse_args()
    if args.reduced:
        args.hosts, args.vms, args.reports = 5, 4, 2
    with tempfile.TemporaryDirectory() as state:
        url = 'sqlite:///%s' % os.path.join(state, 'memcanal.sqlite')
        common.parse_args([sys.argv[0]])
        common.CONF.set_override('connection', url, 'database')
        common.CONF.set_override('metrics_enabled', True, 'api')
        common.CONF.set_override('auth_strategy', 'noauth2', 'api')
        migration.upgrade(url)
        started = time.perf_counter()
        fill(args)
        print('filled %d hosts x %d VMs, %d reports each, in %.1f s' % (
            args.hosts, args.vms, args.reports,
            time.perf_counter() - started))
        app = deploy.loadapp(common.CONF)
        # One line a request otherwise.
        logging.getLogger('memcanal.api.requestlog').setLevel(
            logging.WARNING)
        for per_instance in (True, False):
            common.CONF.set_override('metrics_per_instance', per_instance,
                                     'api')
            seconds, size, series = scrape(app, args.scrapes)
            print('per-VM series %-3s: %.3f s a scrape (median of %d), '
                  '%d bytes, %d series' % (
                      'on' if per_instance else 'off', seconds,
                      args.scrapes, size, series))


if __name__ == '__main__':
    main()
