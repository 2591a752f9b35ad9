"""memcanal-aio: a whole simulated cloud on one machine.

Runs the service, the REST API (and its dashboard) on 127.0.0.1 and N
simulated compute hosts with M VMs each, in one process: SQLite in the
state directory and in-process messaging unless --db-url and
--transport-url say otherwise. The first host is small enough to run hot,
so a short default run shows every kind of decision: memory targets,
migrations off the hot host and memory pooling, applied at once. It
prints progress and each decision as it comes, and at the end a summary
and PNG plots (aio_plots) in the state directory.
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
from oslo_log import log as logging
from oslo_utils import timeutils

from memcanal.api import deploy
from memcanal.cmd import aio_history
from memcanal.cmd import aio_plots
from memcanal.cmd import common
from memcanal.conf import optimizer as optimizer_conf
from memcanal import context as memcanal_context
from memcanal.db import api as db_api
from memcanal.db import decisions as decisions_db
from memcanal.db import migration
from memcanal.db import pooling as pooling_db
from memcanal.policy import demand
from memcanal.policy import guardrails
from memcanal import rpc
from memcanal.rpc import signing
from memcanal.service import optimizer as optimizer_service
from memcanal.service import service as central_service

CONF = common.CONF
# Reports between two decisions when they wait for an operator.
RECOMMEND_REPORTS = 12
MIB = 2 ** 20
# 652 MiB for its VMs once [simulated] reserved_host_memory_mb (2 GiB) is
# kept: the measured demand of four 1 GiB VMs passes [migration]
# threshold, and what they hold resident [pooling] threshold.
HOT_HOST_MEMORY_MB = 2700
# Seconds between two progress lines; decisions are printed as they come.
PROGRESS_EVERY = 5.0
# Seconds between two looks for this run's new memory servers to enable.
ENABLE_EVERY = 0.5
LOG_FILE = 'memcanal-aio.log'


def _arguments(argv):
    parser = argparse.ArgumentParser(
        prog='memcanal-aio', description=__doc__.splitlines()[0],
        epilog='Other arguments (--config-file, --debug, ...) go to '
               'oslo.config.')
    parser.add_argument('--hosts', type=int, default=2,
                        help='simulated compute hosts (default 2)')
    parser.add_argument('--vms', type=int, default=4,
                        help='simulated VMs per host (default 4)')
    parser.add_argument('--interval', type=float, default=2.5,
                        help='seconds between agent reports (default 2.5); '
                             'the optimizer, its hold times and the '
                             'estimators\' windows are counted in '
                             'intervals')
    parser.add_argument('--duration', type=float, default=None,
                        help='seconds to run; default: until interrupted')
    parser.add_argument('--state-dir', default=os.path.join(
        os.path.expanduser('~'), '.local', 'state', 'memcanal-aio'),
        help='where the SQLite database, the agents\' state, the log '
             '(%s) and the plots live (default '
             '~/.local/state/memcanal-aio)' % LOG_FILE)
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
                        default='auto',
                        help='auto: decisions are applied at once; '
                             'recommend: they wait for an operator to '
                             'approve them (the dashboard, or POST '
                             '/decisions/{uuid}/approve) (default auto)')
    parser.add_argument('--hot-host-memory-mb', type=int,
                        default=HOT_HOST_MEMORY_MB,
                        help='memory of the first simulated host in MiB '
                             '(default %d: %d MiB for its VMs once 2 GiB '
                             'are reserved, so with 4 VMs of 1 GiB it runs '
                             'hot: the service migrates VMs off it and '
                             'pages their cold memory out to the other '
                             'hosts\' memory servers); 0: as large as the '
                             'others ([simulated] host_memory_mb)' % (
                                 HOT_HOST_MEMORY_MB,
                                 HOT_HOST_MEMORY_MB - 2048))
    parser.add_argument('--api-port', type=int, default=None,
                        help='port of the REST API on 127.0.0.1 '
                             '(default [api] bind_port, 8793)')
    args, oslo_args = parser.parse_known_args(argv[1:])
    if (args.hosts < 1 or args.vms < 0 or args.interval <= 0
            or args.hot_host_memory_mb < 0):
        parser.error('--hosts must be >= 1, --vms >= 0, --interval > 0 '
                     'and --hot-host-memory-mb >= 0')
    return args, oslo_args


def _host_name(index):
    return 'sim-host-%d' % (index + 1)


def optimize_interval(args):
    """Seconds between the optimizer's runs: a decision at every report
    when they are applied at once. In recommend mode a person approves
    them, and a newer decision supersedes the one waiting: one every
    RECOMMEND_REPORTS reports (30 s by default) leaves the time to read
    it."""
    if args.policy_mode == 'recommend':
        return RECOMMEND_REPORTS * args.interval
    return args.interval


def _configure(args, oslo_args):
    common.parse_args(['memcanal-aio'] + oslo_args, default_config_files=[])
    os.makedirs(args.state_dir, exist_ok=True)
    # The service's and agents' logs go to a file, so the terminal shows
    # what memcanal does; --log-file or --use-stderr say otherwise.
    if CONF.log_file is None and not CONF.use_stderr:
        CONF.set_override('log_file', os.path.join(
            os.path.abspath(args.state_dir), LOG_FILE))
        logging.setup(CONF, 'memcanal')
    db_url = args.db_url or 'sqlite:///%s' % os.path.join(
        os.path.abspath(args.state_dir), 'memcanal.sqlite')
    CONF.set_override('connection', db_url, 'database')
    CONF.set_override('state_path', args.state_dir)
    _use_keys(args.state_dir)
    CONF.set_override('auth_strategy', 'noauth2', 'api')
    CONF.set_override('report_interval', args.interval, 'agent')
    # Every period below is a few report intervals, so that a one-minute
    # run goes through the whole flow a production service goes through
    # in hours; a configuration file can still say otherwise.
    # PRL's estimate after two quiet intervals rather than 120 s, and ESX
    # sampling periods as short.
    CONF.set_default('prl_stability_window', 2 * args.interval, 'estimation')
    CONF.set_default('esx_period', 2 * args.interval, 'estimation')
    # A hypervisor-cache tracing window of three reports every seven,
    # lending 90 % of each VM's memory. The first window sees VMs that
    # have just started; the second, once the file server's memory is
    # full, gives the curve that shows it short of memory.
    CONF.set_default('tracing_period', 7 * args.interval, 'hcache')
    CONF.set_default('tracing_window', 3 * args.interval, 'hcache')
    CONF.set_default('cache_fraction', 0.9, 'hcache')
    # Each VM changed at most every other report; hotplug, so the VM
    # short of memory can grow past its boot size.
    CONF.set_default('optimize_interval', optimize_interval(args),
                     'optimizer')
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
    if args.hot_host_memory_mb:
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
    # Approved actions go out within a second: each decision locks its
    # hosts until it is carried out, and the next waits for that.
    CONF.set_override('periodic_interval', 1, 'service')
    if args.api_port is not None:
        CONF.set_override('bind_port', args.api_port, 'api')
    return db_url


def _use_keys(state_dir):
    """The service's key pair, made in the state directory on the first
    run: the service signs its actions with it, the agents check them
    (each host's own key is made in the state directory too)."""
    private = os.path.join(os.path.abspath(state_dir), 'service.key')
    public = os.path.join(os.path.abspath(state_dir), 'service.pub')
    if not os.path.exists(private):
        signing.create_key_pair(private, public)
    CONF.set_override('signing_key', private, 'service')
    CONF.set_override('service_public_key', public, 'agent')


def _enable_memory_servers(host_names, stop):
    """Enable the simulated memory servers of this run's hosts, which
    register disabled as every host's do, as they register (before the
    optimizer's first run, as a cloud's operator would have): the person
    running the all-in-one is its operator. Returns once all are, or
    when ``stop`` is set."""
    context = memcanal_context.get_admin_context()
    while not stop.wait(ENABLE_EVERY):
        ours = [server for server in pooling_db.list_memory_servers(context)
                if server['host_name'] in host_names]
        for server in ours:
            if not server['enabled']:
                pooling_db.set_enabled(context, server['uuid'], True)
        if len(ours) == len(host_names):
            return


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


class Progress:
    """The lines printed while the cloud runs: a status line every
    PROGRESS_EVERY seconds, and each decision when it is made and when
    its state changes."""

    def __init__(self, started, started_at, host_names, expected_vms):
        self.started = started
        self.started_at = started_at
        self.host_names = host_names
        self.expected_vms = expected_vms
        self.states = {}
        self.last_status = None

    def _stamp(self):
        return '[%5.1fs]' % (time.monotonic() - self.started)

    def status(self, context):
        hosts = db_api.list_hosts(context)
        ours = {h['uuid'] for h in hosts if h['name'] in self.host_names}
        counts = db_api.count_reports(context)
        print('%s hosts up %d/%d | VMs reporting %d/%d | reports: %d host, '
              '%d VM, %d rejected | decisions %s' % (
                  self._stamp(),
                  sum(1 for h in hosts if h['uuid'] in ours
                      and h['state'] == 'up'), len(self.host_names),
                  aio_history.reporting_in_run(context, ours,
                                               self.started_at),
                  self.expected_vms, counts['host_reports'],
                  counts['instance_reports'],
                  db_api.count_rejections(context),
                  _state_counts(self.states.values()) or 'none'),
              flush=True)

    def decisions(self, context):
        """Print the decisions made or moved on since the last call."""
        names = {h['uuid']: h['name'] for h in db_api.list_hosts(context)}
        for listed in decisions_db.list_decisions(context)[::-1]:
            if listed['created_at'] < self.started_at:
                continue
            known = self.states.get(listed['uuid'])
            if known == listed['state']:
                continue
            self.states[listed['uuid']] = listed['state']
            if known is None:
                decision = decisions_db.get_decision(context, listed['uuid'])
                print('%s decision %s %s: %s' % (
                    self._stamp(), listed['uuid'][:8], listed['state'],
                    describe_decision(decision, names)), flush=True)
            else:
                print('%s decision %s %s' % (
                    self._stamp(), listed['uuid'][:8], listed['state']),
                    flush=True)

    def tick(self, context):
        self.decisions(context)
        now = time.monotonic()
        if (self.last_status is None
                or now - self.last_status >= PROGRESS_EVERY - 0.5):
            self.last_status = now
            self.status(context)


def _state_counts(states):
    return ', '.join('%d %s' % (count, state) for state, count in sorted(
        collections.Counter(states).items()))


def describe_decision(decision, host_names):
    """One line: what a decision changes and what it predicts."""
    outputs = decision['outputs']
    if decision['kind'] == 'migration':
        move = outputs['move']
        return ('migrate %s from %s to %s: %s\'s measured demand predicted '
                'at %.0f %% of its capacity after it, %s\'s at %.0f %%' % (
                    move['vm'][:8], move['source'], move['destination'],
                    move['source'], 100 * move['source_utilization'],
                    move['destination'],
                    100 * move['destination_utilization']))
    if decision['kind'] == 'pooling':
        paging = outputs['paging']
        if not paging['lender']:
            return 'take %s on %s back whole (%d MiB resident)' % (
                paging['vm'][:8], paging['host'],
                paging['resident_bytes'] // MIB)
        return ('page %s on %s out: it keeps %d of its %d MiB resident, '
                '%d MiB lent by %s\'s memory server; predicted misses %.2f '
                'times those at its full memory' % (
                    paging['vm'][:8], paging['host'],
                    paging['resident_bytes'] // MIB,
                    paging['previous_resident_bytes'] // MIB,
                    paging['lent_bytes'] // MIB, paging['lender'],
                    paging['relative_miss_ratio']))
    if decision['kind'] == 'memory_targets':
        return 'resize on %s (%s): %s' % (
            host_names.get(decision['host_uuid'], '?'), decision['policy'],
            '; '.join(
                '%s %d -> %d MiB, predicted miss ratio %s' % (
                    action['instance_uuid'][:8],
                    action['previous_bytes'] // MIB,
                    action['target_bytes'] // MIB, _ratio(
                        outputs['instances'][action['instance_uuid']][
                            'predicted_miss_ratio']))
                for action in decision['actions']
                if action['kind'] == 'set_target'))
    return '%s on %s (%s)' % (decision['kind'], host_names.get(
        decision['host_uuid'], '?'), decision['policy'])


def _summary(run, rails, reporting):
    print('\nmemcanal-aio summary: %d VMs reporting in this run' % reporting)
    _hosts_summary(run)
    _vms_summary(run, rails)
    _decisions_summary(run)
    _pooling_summary(run)


def _hosts_summary(run):
    context = memcanal_context.get_admin_context()
    counts = db_api.count_reports(context)
    print('  memory map (MiB): measured demand is the VMs\' working sets '
          'plus their kernels')
    print('    %-12s %5s %9s %12s %9s %16s %7s %9s' % (
        'host', 'state', 'capacity', 'VMs\' memory', 'resident',
        'measured demand', 'lent', 'borrowed'))
    for h in run.hosts:
        print('    %-12s %5s %9d %12d %9d %9d (%3s) %7d %9d' % (
            h['name'], h['state'], h['capacity_bytes'] // MIB,
            h['allocated_bytes'] // MIB, h['resident_bytes'] // MIB,
            h['demand_bytes'] // MIB, '%.0f%%' % (100 * h['utilization'])
            if h['utilization'] is not None else '-',
            h['lent_bytes'] // MIB, h['borrowed_bytes'] // MIB))
    print('  reports stored: %d host reports, %d VM reports, %d rejected' % (
        counts['host_reports'], counts['instance_reports'],
        db_api.count_rejections(context)))


def _vms_summary(run, rails):
    """Every VM's memory against its working sets, and its miss ratio:
    measured by its guest, and as its curve gives it at the memory it
    holds and at its measured demand (its working set and kernel: what
    it would keep, were its memory cut to what it needs). Then what the
    pager's access sampling, the method a real host runs, gives at the
    same sizes: the share of first touches its curve says fault, and
    the faults per second that makes."""
    names = run.host_names()
    print('  memory MiB: flavor, ->target memcanal set, r: resident when '
          'paged; WSS MiB by estimator (sampled: the pager\'s sample of '
          'first touches); miss ratio measured by the guest and given by '
          'its curve (which one); the sampled curve\'s faults at both')
    print('  %-36s  %-10s  %-19s  %13s  %7s  %7s  %7s  %7s  %s' % (
        'VM', 'host', 'project', 'memory MiB', 'PRL', 'PML', 'ESX',
        'sampled', 'miss ratio: measured, at its memory, at its measured '
        'demand; sampled curve at both'))
    for instance in run.instances:
        latest = instance['reports'][-1] if instance['reports'] else None
        wss = latest['wss'] if latest else {}
        curves = latest['mrc'] if latest else {}
        stats = latest['guest_stats'] if latest else None
        memory = optimizer_service.memory_of(instance)
        resident = db_api.resident_of(memory,
                                      instance['resident_target_bytes'])
        measured_demand = demand.vm_demand(
            memory, guardrails.preferred_wss(wss), rails) if latest else None
        print('  %-36s  %-10s  %-19s  %13s  %7s  %7s  %7s  %7s  %s, %s, '
              '%s; %s, %s' % (
                  instance['uuid'], names.get(instance['host_uuid'], '?'),
                  instance['project_id'], _memory(instance, memory,
                                                  resident),
                  *(_mib(wss.get(name))
                    for name in ('prl', 'pml', 'esx', 'sampled')),
                  _ratio(aio_history.misses_per_access(stats)),
                  _curve_ratio(curves, resident),
                  _curve_ratio(curves, measured_demand),
                  _sampled_faults(curves, stats, resident),
                  _sampled_faults(curves, stats, measured_demand)))


def _memory(instance, memory, resident):
    """flavor memory, -> target when memcanal changed it, resident when
    paged: "1024", "1024->1075", "1024 r64"."""
    text = '%d' % (instance['allocated_bytes'] // MIB)
    if memory != instance['allocated_bytes']:
        text += '->%d' % (memory // MIB)
    if resident != memory:
        text += ' r%d' % (resident // MIB)
    return text


def _curve_ratio(curves, size):
    ratio, method = aio_history.curve_at(curves, size)
    return '%.3f %s' % (ratio, method) if ratio is not None else '-'


def _sampled_faults(curves, stats, size):
    """The sampled curve at ``size``: the share of first touches that
    fault, and the faults per second it makes of the touch rate."""
    ratio, _ = aio_history.curve_at(curves, size, methods=('sampled',))
    if ratio is None:
        return '-'
    touches = (stats or {}).get('sampled_touches_per_s')
    if touches is None:
        return '%.3f' % ratio
    return '%.3f (%.0f/s)' % (ratio, ratio * touches)


def _decisions_summary(run):
    """How many decisions in each state; every migration; every applied
    resize with, for each VM it changed, the miss ratio predicted beside
    the one its guest measured while it kept that size."""
    names = run.host_names()
    print('  decisions in this run: %d (%s)' % (
        len(run.decisions),
        _state_counts(d['state'] for d in run.decisions) or 'none yet'))
    for decision in run.applied('migration'):
        print('  migrated: %s' % describe_decision(decision, names))
    instances = {i['uuid']: i for i in run.instances}
    resizes = run.applied('memory_targets')
    if resizes:
        print('  resizes applied, miss ratio predicted and measured while '
              'the VM kept that size:')
    for decision in resizes:
        for action in decision['actions']:
            if (action['kind'] != 'set_target'
                    or action['instance_uuid'] not in instances):
                continue
            predicted = decision['outputs']['instances'][
                action['instance_uuid']]
            print('    [%5.1fs] %s on %s  %5d -> %5d MiB  miss ratio '
                  'predicted %s (%s curve), %s' % (
                      aio_history.seconds_since(run.started_at,
                                                decision['applied_at']),
                      action['instance_uuid'][:8],
                      names.get(decision['host_uuid'], '?'),
                      action['previous_bytes'] // MIB,
                      action['target_bytes'] // MIB,
                      _ratio(predicted['predicted_miss_ratio']),
                      predicted['curve'], _measured(run.measured_at_size(
                          instances[action['instance_uuid']], decision))))


def _measured(measured):
    if measured is None:
        return 'not measured yet'
    text = 'measured %.3f over %d reports (latest %.3f)' % (
        measured.overall, measured.reports, measured.latest)
    if measured.traced != measured.overall:
        text += ', %.3f with the tracing windows\' refills' % (
            measured.traced)
    return text


def _pooling_summary(run):
    """Who lends what to whom, and how each paged VM fares: what it
    keeps resident, its pager's faults in its latest interval and the
    miss ratio its paging curve gives at its resident size."""
    context = memcanal_context.get_admin_context()
    instances = {i['uuid']: i for i in run.instances}
    for server in pooling_db.list_memory_servers(context):
        for lease in server['leases']:
            instance = instances.get(lease['instance_uuid'])
            if instance is None:
                continue
            report = instance['reports'][-1] if instance['reports'] else {}
            stats = report.get('guest_stats', {})
            resident = db_api.resident_of(
                optimizer_service.memory_of(instance),
                instance['resident_target_bytes'])
            paging, _ = aio_history.curve_at(report.get('mrc', {}), resident,
                                             methods=('paging',))
            print('  pooled: %s lends %d MiB to %s on %s, which keeps %d of '
                  'its %d MiB resident; %s pager faults in its last '
                  'interval, miss ratio at that size %s (paging curve)' % (
                      server['host_name'], lease['lent_bytes'] // MIB,
                      lease['instance_uuid'], lease['borrower_host_name'],
                      resident // MIB, instance['allocated_bytes'] // MIB,
                      '%d' % stats['paging_faults']
                      if 'paging_faults' in stats else '-',
                      _ratio(paging)))


def _ratio(value):
    return '%.3f' % value if value is not None else '-'


def _mib(size):
    return '%.1f' % (size / MIB) if size is not None else '-'


def main(argv=None):
    args, oslo_args = _arguments(argv or sys.argv)
    db_url = _configure(args, oslo_args)
    print('memcanal-aio: %d hosts x %d VMs, a report every %gs, decisions '
          '%s (--policy-mode %s)' % (
              args.hosts, args.vms, args.interval,
              'applied at once' if args.policy_mode == 'auto'
              else 'waiting for approval', args.policy_mode))
    if args.hot_host_memory_mb:
        print('  %s has %d MiB (--hot-host-memory-mb): its VMs need more '
              'than it has, so memcanal migrates and pages them' % (
                  _host_name(0), args.hot_host_memory_mb))
    print('  state and plots in %s; log: %s' % (
        args.state_dir, CONF.log_file or 'stderr'))
    migration.upgrade(db_url)
    # The API binds its port first: a port in use stops the run before
    # any host starts.
    server = _serve_api()
    api_url = 'http://%s:%d' % server.server_address[:2]
    rpc.init(CONF, url=args.transport_url)
    started_at = timeutils.utcnow()
    services = [common.configured(central_service.create, CONF,
                                  transport_url=args.transport_url)]
    services += [agent_service.create(CONF, host=_host_name(i),
                                      transport_url=args.transport_url)
                 for i in range(args.hosts)]
    for service in services:
        service.start()
    print('  API:       %s (noauth2: send X-Auth-Token: admin)' % api_url)
    print('  dashboard: %s/dashboard (token: admin)' % api_url, flush=True)
    progress = Progress(time.monotonic(), started_at,
                        {_host_name(i) for i in range(args.hosts)},
                        args.hosts * args.vms)
    stop_enabling = threading.Event()
    threading.Thread(target=_enable_memory_servers, daemon=True,
                     args=(progress.host_names, stop_enabling)).start()
    try:
        _run(args, progress)
    finally:
        stop_enabling.set()
        # The service's periodic jobs stop first: agents take seconds to
        # disconnect from RabbitMQ, long enough to be marked down
        # otherwise.
        services[0].tg.stop_timers()
        for service in reversed(services):
            service.stop()
        server.shutdown()
    _report(args, progress)
    rpc.cleanup()
    return 0


def _run(args, progress):
    """Print progress until --duration has passed, SIGTERM or Ctrl-C."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    deadline = (progress.started + args.duration if args.duration
                else None)
    context = memcanal_context.get_admin_context()
    try:
        while not stop.is_set():
            wait = min(args.interval, PROGRESS_EVERY)
            if deadline is not None:
                wait = min(wait, deadline - time.monotonic())
                if wait <= 0:
                    break
            stop.wait(wait)
            progress.tick(context)
    except KeyboardInterrupt:
        pass


def _report(args, progress):
    """The summary and the plots of the run, once it stopped."""
    context = memcanal_context.get_admin_context()
    progress.decisions(context)
    rails = guardrails.Rails(kernel_bytes=CONF.optimizer.kernel_mb * MIB)
    run = aio_history.load(context, progress.started_at)
    hosts = {h['uuid'] for h in run.hosts
             if h['name'] in progress.host_names}
    _summary(run, rails, aio_history.reporting_in_run(
        context, hosts, progress.started_at))
    print('  plots: %s' % ', '.join(aio_plots.write_plots(
        run, args.state_dir, rails)))
    print('\nThe API and the dashboard stopped with this run. To keep them '
          'up, run memcanal-aio without --duration (Ctrl-C stops it); '
          'rerun with --state-dir %s to continue from this state.'
          % args.state_dir)
    print(fidelity_line(run.fidelity()), flush=True)


def fidelity_line(fidelity):
    """The run's last line: the mean gap between the miss ratio each
    resize predicted and the one measured from the
    aio_history.FIDELITY_FROM_REPORT-th report at the new size on,
    overall and by VM (with how many resizes each)."""
    if fidelity.overall is None:
        return ('fidelity: - (no resize held for %d reports)'
                % aio_history.FIDELITY_FROM_REPORT)
    by_vm = fidelity.by_vm()
    return ('fidelity: %.3f mean |predicted - measured| miss ratio over %d '
            'resizes, measured from the %s report at the new size on; by '
            'VM: %s' % (
                fidelity.overall, sum(count for _, _, count in by_vm),
                _ordinal(aio_history.FIDELITY_FROM_REPORT),
                ', '.join('%s %.3f (%d)' % (uuid[:8], gap, count)
                          for uuid, gap, count in by_vm)))


def _ordinal(number):
    return '%d%s' % (number, {1: 'st', 2: 'nd', 3: 'rd'}.get(number, 'th'))
