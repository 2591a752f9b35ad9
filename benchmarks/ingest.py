"""Reports stored per second by memcanal-service over RabbitMQ.

Side by side in one process and on one RabbitMQ: (1) the service's real
RPC endpoint validating and storing agent reports in SQL, and (2) a raw
oslo.messaging cast loop whose endpoint only counts the same payloads.
The ratio says what validation and storage cost on top of messaging.

    python benchmarks/ingest.py [--reports 500] [--vms 8]
        [--transport-url rabbit://guest:guest@127.0.0.1:5672/]
        [--db-url sqlite:///... | mysql+pymysql://root@127.0.0.1/memcanal]
"""

import argparse
import copy
import os
import sys
import tempfile
import threading
import time
import uuid

import oslo_messaging as messaging

from memcanal.agent import driver
from memcanal.agent import manager as agent_manager
from memcanal.cmd import common
from memcanal import context as memcanal_context
from memcanal.db import api as db_api
from memcanal.db import migration
from memcanal import rpc
from memcanal.rpc import service_api
from memcanal.rpc import service as rpc_service
from memcanal.service import manager as service_manager

CONF = common.CONF


class CountingEndpoint:
    """The baseline: receive each report and do nothing else."""

    target = messaging.Target(version='1.0')

    def __init__(self, expected):
        self.expected = expected
        self.received = 0
        self.lock = threading.Lock()
        self.done = threading.Event()

    def report(self, context, report):
        with self.lock:
            self.received += 1
            if self.received == self.expected:
                self.done.set()


def make_reports(count, vms, host_uuid, state_dir):
    """``count`` reports as the real agent builds them for ``vms`` VMs."""
    CONF.set_override('instances', vms, 'simulated')
    CONF.set_override('references_per_interval', 20000, 'simulated')
    CONF.set_override('state_path', state_dir)
    agent = agent_manager.AgentManager(
        CONF, 'bench-host', driver.load('simulated', CONF, 'bench-host'))
    agent.host_uuid = host_uuid
    template = agent.build_report()
    reports = []
    for sequence in range(1, count + 1):
        report = copy.deepcopy(template)
        report['sequence'] = sequence
        reports.append(report)
    return reports


def cast_all(client, reports, context):
    for report in reports:
        client.report(context, report)


def measure(name, start_server, reports, wait_done, context):
    server = start_server()
    client = service_api.ServiceAPI()
    client.client = client.client.prepare(topic=name)
    # Warm the connection so both runs start with an open channel.
    time.sleep(0.5)
    started = time.perf_counter()
    cast_all(client, reports, context)
    wait_done()
    elapsed = time.perf_counter() - started
    server.stop()
    return len(reports) / elapsed


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--reports', type=int, default=500)
    parser.add_argument('--vms', type=int, default=8)
    parser.add_argument('--transport-url',
                        default='rabbit://guest:guest@127.0.0.1:5672/')
    parser.add_argument('--db-url', default=None)
    args = parser.parse_args()

    state_dir = tempfile.mkdtemp(prefix='memcanal-bench-')
    db_url = args.db_url or 'sqlite:///%s' % os.path.join(state_dir,
                                                          'bench.sqlite')
    common.parse_args([sys.argv[0]], default_config_files=[])
    CONF.set_override('connection', db_url, 'database')
    # A private exchange, so no running memcanal-service takes the casts.
    messaging.set_transport_defaults(
        control_exchange='memcanal-bench-%s' % uuid.uuid4().hex[:8])
    migration.upgrade(db_url)
    rpc.init(CONF, url=args.transport_url)
    context = memcanal_context.get_admin_context()
    host = db_api.register_host(context, 'bench-host-%s' % uuid.uuid4().hex,
                                2 ** 36, 0)
    reports = make_reports(args.reports, args.vms, host['uuid'], state_dir)
    print('%d reports of %d VMs each (MRC of %d points) over %s, stored in '
          '%s' % (args.reports, args.vms,
                  len(reports[0]['instances'][0]['mrc']['exact']),
                  args.transport_url.split('@')[-1],
                  db_url.split('://')[0]), flush=True)

    counting = CountingEndpoint(len(reports))

    def start_raw():
        service = rpc_service.RPCService('bench-raw', 'bench', [counting],
                                         conf=CONF)
        service.start()
        return service
    raw_rate = measure('bench-raw', start_raw, reports,
                       lambda: counting.done.wait(600), context)

    ingest = service_manager.ServiceManager(CONF)

    def start_memcanal():
        service = rpc_service.RPCService('bench-memcanal', 'bench', [ingest],
                                         conf=CONF)
        service.start()
        return service

    def stored_all():
        while ingest.counters['stored'] + ingest.counters['rejected'] \
                + ingest.counters['failed'] < len(reports):
            time.sleep(0.01)
    memcanal_rate = measure('bench-memcanal', start_memcanal, reports,
                            stored_all, context)
    # The host's highest stored sequence; the database may hold other
    # hosts' reports (a shared --db-url).
    stored = db_api.get_host(context, host['uuid'])['last_sequence']
    print('raw oslo.messaging cast loop : %8.1f reports/s' % raw_rate)
    print('memcanal-service ingest      : %8.1f reports/s  (%d stored, '
          '%s)' % (memcanal_rate, stored, ingest.counters))
    print('ratio memcanal / raw         : %8.3f' % (memcanal_rate / raw_rate))
    rpc.cleanup()
    return 0 if stored == len(reports) else 1


if __name__ == '__main__':
    sys.exit(main())
