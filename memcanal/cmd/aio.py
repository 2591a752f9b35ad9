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
from memcanal.cmd import aio_summary
from memcanal.cmd import common
from memcanal.conf import optimizer as optimizer_conf
from memcanal import context as memcanal_context
from memcanal.db import api as db_api
from memcanal.db import decisions as decisions_db
from memcanal.db import migration
from memcanal.db import pooling as pooling_db
from memcanal.policy import guardrails
from memcanal import rpc
from memcanal.rpc import signing
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
    parser.add_argument('--seed', type=int, default=None,
                        help='seed of the simulated VMs\' workloads '
                             '(default [simulated] seed, 0): another seed, '
                             'another run of the same workloads')
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
    # On loopback, for one person: its Prometheus series too.
    CONF.set_default('metrics_enabled', True, 'api')
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
    # Steps of a quarter of a VM's memory rather than 5 %: a file server
    # its curve says needs twice its memory gets it in three steps, a
    # minute, rather than in fifteen, most of a five-minute run.
    CONF.set_default('max_step_fraction', 0.25, 'optimizer')
    CONF.set_default('default_mechanism', 'hotplug', 'optimizer')
    CONF.set_override('mode', args.policy_mode, 'optimizer')
    if args.policy is not None:
        CONF.set_override('policy', args.policy, 'optimizer')
    # The file server's files are twice its memory: the VM short of
    # memory that the policies help.
    CONF.set_default('file_server_memory_ratio', 2.0, 'simulated')
    CONF.set_override('instances', args.vms, 'simulated')
    if args.seed is not None:
        CONF.set_override('seed', args.seed, 'simulated')
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
    """Admit this run's hosts to pooling and enable their simulated
    memory servers, which register not admitted and disabled as every
    host's do, as they register (before the optimizer's first run, as a
    cloud's operator would have): the person running the all-in-one is
    its operator. Returns once all are, or when ``stop`` is set."""
    context = memcanal_context.get_admin_context()
    while not stop.wait(ENABLE_EVERY):
        hosts = [host for host in db_api.list_hosts(context)
                 if host['name'] in host_names]
        for host in hosts:
            if not host['pooling_admitted']:
                pooling_db.set_admitted(context, host['uuid'], True)
        ours = [server for server in pooling_db.list_memory_servers(context)
                if server['host_name'] in host_names]
        for server in ours:
            if not server['enabled']:
                pooling_db.set_enabled(context, server['uuid'], True)
        if len(ours) == len(hosts) == len(host_names):
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
                  aio_summary.state_counts(self.states.values()) or 'none'),
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
                    aio_summary.describe_decision(decision, names)),
                    flush=True)
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
    print('  metrics:   %s/metrics (Prometheus, no token)' % api_url,
          flush=True)
    progress = Progress(time.monotonic(), started_at,
                        {_host_name(i) for i in range(args.hosts)},
                        args.hosts * args.vms)
    stop_enabling = threading.Event()
    threading.Thread(target=_enable_memory_servers, daemon=True,
                     args=(progress.host_names, stop_enabling)).start()
    try:
        _run(args, progress)
    finally:
        # The run's end, for the settled: line's last minutes: what is
        # applied while the agents stop counts in them.
        ended_at = timeutils.utcnow()
        stop_enabling.set()
        # The service's periodic jobs stop first: agents take seconds to
        # disconnect from RabbitMQ, long enough to be marked down
        # otherwise.
        services[0].tg.stop_timers()
        for service in reversed(services):
            service.stop()
        server.shutdown()
    _report(args, progress, ended_at)
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


def _report(args, progress, ended_at):
    """The summary and the plots of the run, once it stopped at
    ``ended_at`` (UTC)."""
    context = memcanal_context.get_admin_context()
    progress.decisions(context)
    rails = guardrails.Rails(kernel_bytes=CONF.optimizer.kernel_mb * MIB)
    run = aio_history.load(context, progress.started_at)
    hosts = {h['uuid'] for h in run.hosts
             if h['name'] in progress.host_names}
    aio_summary.summary(run, rails, aio_history.reporting_in_run(
        context, hosts, progress.started_at))
    print('  plots: %s' % ', '.join(aio_plots.write_plots(
        run, args.state_dir, rails)))
    print('\nThe API and the dashboard stopped with this run. To keep them '
          'up, run memcanal-aio without --duration (Ctrl-C stops it); '
          'rerun with --state-dir %s to continue from this state.'
          % args.state_dir)
    print(aio_summary.settled_line(run, ended_at))
    print(aio_summary.fidelity_line(run.fidelity()), flush=True)
