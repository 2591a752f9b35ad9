"""memcanal-aio: a whole simulated cloud on one machine.

Runs the service, the REST API on 127.0.0.1 and N simulated compute hosts
with M VMs each, in one process: SQLite in the state directory and
in-process messaging unless --db-url and --transport-url say otherwise.
It prints progress every report interval and a summary at the end.
"""

import argparse
import collections
import os
import signal
import socketserver
import sys
import threading
import time
from wsgiref import simple_server

from memcanal.agent import service as agent_service
from memcanal.api import deploy
from memcanal.cmd import common
from memcanal.conf import optimizer as optimizer_conf
from memcanal import context as memcanal_context
from memcanal.db import api as db_api
from memcanal.db import decisions as decisions_db
from memcanal.db import migration
from memcanal.db import pooling as pooling_db
from memcanal import rpc
from memcanal.service import service as central_service

CONF = common.CONF
MIB = 2 ** 20


def _arguments(argv):
    parser = argparse.ArgumentParser(
        prog='memcanal-aio', description=__doc__.splitlines()[0],
        epilog='Other arguments (--config-file, --debug, ...) go to '
               'oslo.config.')
    parser.add_argument('--hosts', type=int, default=2,
                        help='simulated compute hosts (default 2)')
    parser.add_argument('--vms', type=int, default=4,
                        help='simulated VMs per host (default 4)')
    parser.add_argument('--interval', type=float, default=5.0,
                        help='seconds between agent reports (default 5)')
    parser.add_argument('--duration', type=float, default=None,
                        help='seconds to run; default: until interrupted')
    parser.add_argument('--state-dir', default=os.path.join(
        os.path.expanduser('~'), '.local', 'state', 'memcanal-aio'),
        help='where the SQLite database and agent state live '
             '(default ~/.local/state/memcanal-aio)')
    parser.add_argument('--db-url', default=None,
                        help='SQLAlchemy URL of the database '
                             '(default: SQLite in the state directory)')
    parser.add_argument('--transport-url', default='fake://',
                        help='oslo.messaging URL, e.g. '
                             'rabbit://guest:guest@127.0.0.1:5672/ '
                             '(default fake://, in-process)')
    parser.add_argument('--policy', choices=optimizer_conf.POLICIES,
                        default=None,
                        help='memory policy of every host (default '
                             '[optimizer] policy, isolated_sharing)')
    parser.add_argument('--policy-mode', choices=('recommend', 'auto'),
                        default='recommend',
                        help='recommend: decisions wait for approval '
                             '(POST /decisions/{uuid}/approve); auto: they '
                             'are applied at once (default recommend)')
    parser.add_argument('--hot-host-memory-mb', type=int, default=None,
                        help='memory of the first simulated host in MiB '
                             '(default [simulated] host_memory_mb): small '
                             'enough, its VMs\' measured demand passes '
                             '[migration] threshold and the service '
                             'migrates VMs off it to the others')
    parser.add_argument('--api-port', type=int, default=None,
                        help='port of the REST API on 127.0.0.1 '
                             '(default [api] bind_port, 8793)')
    args, oslo_args = parser.parse_known_args(argv[1:])
    if args.hosts < 1 or args.vms < 0 or args.interval <= 0:
        parser.error('--hosts must be >= 1, --vms >= 0 and --interval > 0')
    return args, oslo_args


def _host_name(index):
    return 'sim-host-%d' % (index + 1)


def _configure(args, oslo_args):
    common.parse_args(['memcanal-aio'] + oslo_args, default_config_files=[])
    os.makedirs(args.state_dir, exist_ok=True)
    db_url = args.db_url or 'sqlite:///%s' % os.path.join(
        os.path.abspath(args.state_dir), 'memcanal.sqlite')
    CONF.set_override('connection', db_url, 'database')
    CONF.set_override('state_path', args.state_dir)
    CONF.set_override('auth_strategy', 'noauth2', 'api')
    CONF.set_override('report_interval', args.interval, 'agent')
    # PRL's estimate after two quiet intervals rather than 120 s, and ESX
    # sampling periods as short, so a short run shows them; a
    # configuration file can still say otherwise.
    CONF.set_default('prl_stability_window', 2 * args.interval, 'estimation')
    CONF.set_default('esx_period', 2 * args.interval, 'estimation')
    # A hypervisor-cache tracing window every ten reports, lending 90 % of
    # each VM's memory: the file-server VM's files (an eighth of its
    # memory) then overflow what it keeps, and its "hcache" curve shows
    # the misses a cut would cost.
    CONF.set_default('tracing_period', 10 * args.interval, 'hcache')
    CONF.set_default('tracing_window', 3 * args.interval, 'hcache')
    CONF.set_default('cache_fraction', 0.9, 'hcache')
    # A decision every three reports, each VM changed at most every other
    # report; hotplug, so the VM short of memory can grow past its boot
    # size.
    CONF.set_default('optimize_interval', 3 * args.interval, 'optimizer')
    CONF.set_default('hold_seconds', 2 * args.interval, 'optimizer')
    CONF.set_default('default_mechanism', 'hotplug', 'optimizer')
    CONF.set_override('mode', args.policy_mode, 'optimizer')
    if args.policy is not None:
        CONF.set_override('policy', args.policy, 'optimizer')
    # The file server's files are twice its memory: the VM short of
    # memory that the policies help.
    CONF.set_default('file_server_memory_ratio', 2.0, 'simulated')
    CONF.set_override('instances', args.vms, 'simulated')
    # A real compute node's agent defaults to libvirt; here the hosts
    # are simulated.
    CONF.set_override('driver', 'simulated', 'agent')
    # Migrations off a host that stays hot for two intervals, carried out
    # by the simulated hosts themselves (there is no nova).
    CONF.set_default('enabled', True, 'migration')
    CONF.set_override('executor', 'agent', 'migration')
    CONF.set_default('hold_seconds', 2 * args.interval, 'migration')
    CONF.set_default('min_gain_mb', 16, 'migration')
    if args.hot_host_memory_mb is not None:
        CONF.set_override('host_memory_mb_by_host', {
            _host_name(0): args.hot_host_memory_mb}, 'simulated')
    # Memory pooling: every simulated host runs a simulated memory server
    # lending 4 GiB, and a host whose VMs hold more than 90 % of its
    # memory pages their cold memory out to another's.
    CONF.set_default('enabled', True, 'pooling')
    CONF.set_default('memserver_mb', 4096, 'simulated')
    CONF.set_default('min_page_mb', 16, 'pooling')
    # VMs of an earlier run with more VMs per host leave after a while.
    CONF.set_default('instance_gone_after', 10 * args.interval, 'service')
    CONF.set_override('periodic_interval', max(1, int(args.interval)),
                      'service')
    if args.api_port is not None:
        CONF.set_override('bind_port', args.api_port, 'api')
    return db_url


class _QuietHandler(simple_server.WSGIRequestHandler):
    def log_message(self, *args):
        pass


class _ThreadingWSGIServer(socketserver.ThreadingMixIn,
                           simple_server.WSGIServer):
    daemon_threads = True


def _serve_api():
    server = simple_server.make_server(
        CONF.api.bind_host, CONF.api.bind_port, deploy.loadapp(CONF),
        server_class=_ThreadingWSGIServer, handler_class=_QuietHandler)
    threading.Thread(target=server.serve_forever, daemon=True,
                     name='memcanal-api').start()
    return server


def _progress(started, expected_vms):
    context = memcanal_context.get_admin_context()
    hosts = db_api.list_hosts(context)
    counts = db_api.count_reports(context)
    reporting = sum(1 for instance in db_api.list_instances(context))
    decisions = collections.Counter(
        d['state'] for d in decisions_db.list_decisions(context))
    print('[%6.1fs] hosts up %d/%d | VMs reporting %d/%d | host reports %d '
          '| VM reports %d | rejected %d | decisions %s' % (
              time.monotonic() - started,
              sum(1 for h in hosts if h['state'] == 'up'), len(hosts),
              reporting, expected_vms, counts['host_reports'],
              counts['instance_reports'],
              db_api.count_rejections(context),
              ', '.join('%d %s' % (n, state) for state, n in sorted(
                  decisions.items())) or 'none'), flush=True)


def _summary(api_url):
    context = memcanal_context.get_admin_context()
    hosts = db_api.list_hosts(context)
    counts = db_api.count_reports(context)
    print('\nmemcanal-aio summary')
    print('  hosts: %d (%s)' % (len(hosts), ', '.join(
        '%s %s, %d VMs, measured demand %s of its capacity' % (
            h['name'], h['state'], h['instance_count'],
            '%.0f %%' % (100 * h['utilization'])
            if h['utilization'] is not None else '-')
        for h in hosts)))
    print('  memory map (MiB): %s' % '; '.join(
        '%s capacity %d, VMs\' memory %d, resident %d, lent %d, borrowed %d'
        % (h['name'], h['capacity_bytes'] // MIB, h['allocated_bytes'] // MIB,
           h['resident_bytes'] // MIB, h['lent_bytes'] // MIB,
           h['borrowed_bytes'] // MIB) for h in hosts))
    print('  reports stored: %d host reports, %d VM reports, %d rejected' % (
        counts['host_reports'], counts['instance_reports'],
        db_api.count_rejections(context)))
    print('  %-36s  %-10s  %-19s  %9s  %8s  %8s  %8s  %s' % (
        'VM', 'host', 'project', 'alloc MiB', 'PRL MiB', 'PML MiB',
        'ESX MiB', 'miss ratio: at half PRL WSS (SHARDS), at the memory '
        'kept while traced (hcache)'))
    names = {h['uuid']: h['name'] for h in hosts}
    for listed in db_api.list_instances(context):
        instance = db_api.get_instance(context, listed['uuid'])
        report = instance['latest_report'] or {'wss': {}, 'mrc': {}}
        wss = report['wss']
        curves = report['mrc']
        traced = curves.get('hcache') or [[0, None]]
        print('  %-36s  %-10s  %-19s  %9d  %8s  %8s  %8s  %s, %s' % (
            instance['uuid'], names.get(instance['host_uuid'], '?'),
            instance['project_id'], instance['allocated_bytes'] // MIB,
            *(_mib(wss.get(name)) for name in ('prl', 'pml', 'esx')),
            _miss_ratio_at(curves.get('shards'), wss.get('prl', 0) // 2),
            _miss_ratio_at(curves.get('hcache'), traced[0][0])))
    _decisions_summary(context)
    _pooling_summary(context)
    print('  API: %s (try: curl -H "X-Auth-Token: admin" %s/instances)' % (
        api_url, api_url))


def _decisions_summary(context):
    """How many decisions in each state; for the newest applied one of
    each host, every VM's predicted miss ratio beside the one measured
    since (misses per access in its latest report)."""
    made = decisions_db.list_decisions(context)
    states = collections.Counter(d['state'] for d in made)
    print('  decisions: %d (%s)' % (len(made), ', '.join(
        '%d %s' % (count, state) for state, count in sorted(
            states.items())) or 'none yet'))
    for listed in made:
        if listed['kind'] == 'migration' and listed['state'] == 'applied':
            move = listed['outputs']['move']
            print('  migrated %s from %s to %s: %s predicted at %.0f %% '
                  'after it' % (move['vm'], move['source'],
                                move['destination'], move['source'],
                                100 * move['source_utilization']))
    shown = set()
    for listed in made:
        if (listed['state'] != 'applied' or listed['host_uuid'] in shown
                or listed['kind'] != 'memory_targets'):
            continue
        shown.add(listed['host_uuid'])
        decision = decisions_db.get_decision(context, listed['uuid'])
        print('  last applied decision %s (%s):' % (decision['uuid'],
                                                    decision['policy']))
        for action in decision['actions']:
            predicted = decision['outputs']['instances'][
                action['instance_uuid']]
            stats = db_api.get_instance(context, action['instance_uuid'])[
                'latest_report']['guest_stats']
            measured = (stats['misses'] / stats['accesses']
                        if stats.get('accesses') else None)
            print('    %s  %5d -> %5d MiB  miss ratio predicted %s (%s '
                  'curve), measured now %s' % (
                      action['instance_uuid'],
                      action['previous_bytes'] // MIB,
                      action['target_bytes'] // MIB,
                      _ratio(predicted['predicted_miss_ratio']),
                      predicted['curve'], _ratio(measured)))


def _pooling_summary(context):
    """Who lends what to whom, and how each paged VM fares: what it
    keeps resident, its pager's faults in its latest interval and the
    miss ratio its paging curve gives at its resident size."""
    for server in pooling_db.list_memory_servers(context):
        for lease in server['leases']:
            instance = db_api.get_instance(context, lease['instance_uuid'])
            report = instance['latest_report'] or {}
            stats = report.get('guest_stats', {})
            resident = (instance['resident_target_bytes']
                        or instance['allocated_bytes'])
            print('  pooled: %s lends %d MiB to %s on %s, which keeps %d of '
                  'its %d MiB resident; %s pager faults in its last '
                  'interval, miss ratio at that size %s (paging curve)' % (
                      server['host_name'], lease['lent_bytes'] // MIB,
                      lease['instance_uuid'], lease['borrower_host_name'],
                      resident // MIB, instance['allocated_bytes'] // MIB,
                      '%d' % stats['paging_faults']
                      if 'paging_faults' in stats else '-',
                      _miss_ratio_at(report.get('mrc', {}).get('paging'),
                                     resident)))


def _ratio(value):
    return '%.3f' % value if value is not None else '-'


def _mib(size):
    return '%.1f' % (size / MIB) if size is not None else '-'


def _miss_ratio_at(points, size):
    """The curve's miss ratio at the largest reported size <= ``size``."""
    below = [ratio for point_size, ratio in points or () if point_size <= size]
    return '%.3f' % below[-1] if below else '-'


def main(argv=None):
    args, oslo_args = _arguments(argv or sys.argv)
    db_url = _configure(args, oslo_args)
    print('memcanal-aio: %d hosts x %d VMs, reports every %gs, state in %s'
          % (args.hosts, args.vms, args.interval, args.state_dir))
    migration.upgrade(db_url)
    rpc.init(CONF, url=args.transport_url)
    services = [common.configured(central_service.create, CONF,
                                  transport_url=args.transport_url)]
    services += [agent_service.create(CONF, host=_host_name(i),
                                      transport_url=args.transport_url)
                 for i in range(args.hosts)]
    for service in services:
        service.start()
    server = _serve_api()
    api_url = 'http://%s:%d' % server.server_address[:2]
    print('API on %s (noauth2: send X-Auth-Token: admin)' % api_url,
          flush=True)

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    started = time.monotonic()
    deadline = started + args.duration if args.duration else None
    try:
        while not stop.is_set():
            wait = args.interval
            if deadline is not None:
                wait = min(wait, deadline - time.monotonic())
                if wait <= 0:
                    break
            stop.wait(wait)
            _progress(started, args.hosts * args.vms)
    except KeyboardInterrupt:
        pass
    # The service's periodic jobs stop first: agents take seconds to
    # disconnect from RabbitMQ, long enough to be marked down otherwise.
    services[0].tg.stop_timers()
    for service in reversed(services):
        service.stop()
    server.shutdown()
    _summary(api_url)
    rpc.cleanup()
    return 0
