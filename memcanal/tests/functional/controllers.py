"""Several memcanal-service processes ("controllers") against one
MariaDB, one RabbitMQ virtual host and one tooz backend, with simulated
compute hosts' agents (sim_agents.py) in a process of their own: what
test_controllers.py asserts and benchmarks/controllers.py measures.

The simulated cloud is memcanal-aio's, shortened: a small first host
whose VMs need more than it has (migrations and memory pooling off it),
file servers the optimizer resizes, every period a few report intervals.
"""

import collections
import os
import re
import signal
import statistics
import subprocess
import sys
import time
import uuid

from oslo_utils import timeutils
import sqlalchemy as sa

from memcanal import context as memcanal_context
from memcanal.db import decisions as decisions_db
from memcanal.db import models
from memcanal.db import pooling as pooling_db
from memcanal.rpc import signing

BIN = os.path.dirname(sys.executable)
JOB_TAKEN = re.compile(r'This process \((\S+)\) now runs job (\S+)')
HOST_SHARE = re.compile(r'This process \((\S+)\) serves (\d+) of (\d+) '
                        r'hosts; service processes: (.*)$')
OPTIMIZER_RUN = re.compile(r'Optimizer run: (\d+) decisions, ([\d.]+) s CPU')
# What the agent logs when a decision's action arrives again after it
# applied it: a second send.
APPLIED_AGAIN = 'was already applied; answering its outcome again'


def controller_name(index):
    return 'controller-%d' % (index + 1)


class Cloud:
    """Config files, processes and logs of one run under ``state_dir``.

    ``backend_url`` is the tooz backend (None: no coordination); each
    run gets a namespace of its own on Redis, so runs never share locks.
    """

    def __init__(self, state_dir, db_url, rabbit_url, backend_url,
                 hosts=6, vms=4, report_interval=2.0, optimize_interval=4.0,
                 mode='auto', lock_timeout=5):
        self.state_dir = str(state_dir)
        self.db_url = db_url
        self.hosts = hosts
        self.processes = {}
        os.makedirs(self.state_dir, exist_ok=True)
        private = os.path.join(self.state_dir, 'service.key')
        public = os.path.join(self.state_dir, 'service.pub')
        signing.create_key_pair(private, public)
        if backend_url and backend_url.startswith('redis'):
            backend_url += '%stimeout=%d&namespace=memcanal-%s' % (
                '&' if '?' in backend_url else '?', lock_timeout,
                uuid.uuid4().hex[:8])
        self.config = os.path.join(self.state_dir, 'memcanal.conf')
        with open(self.config, 'w') as config:
            config.write(_CONFIG % {
                'transport_url': rabbit_url,
                'exchange': 'memcanal-ctl-%s' % uuid.uuid4().hex[:8],
                'state_dir': self.state_dir, 'db_url': db_url,
                'backend': ('backend_url = %s\n' % backend_url
                            if backend_url else ''),
                'public': public, 'private': private, 'vms': vms,
                'report_interval': report_interval,
                'hold': 2 * report_interval,
                'optimize_interval': optimize_interval, 'mode': mode})

    def _start(self, name, command):
        host_config = os.path.join(self.state_dir, '%s.conf' % name)
        with open(host_config, 'w') as config:
            config.write('[DEFAULT]\nhost = %s\n' % name)
        self.processes[name] = subprocess.Popen(
            command + ['--config-file', self.config,
                       '--config-file', host_config],
            start_new_session=True, stdout=open(self.log(name), 'ab'),
            stderr=subprocess.STDOUT)

    def start_controller(self, index):
        self._start(controller_name(index),
                    [os.path.join(BIN, 'memcanal-service')])

    def start_agents(self):
        self._start('agents', [sys.executable, '-m',
                               'memcanal.tests.functional.sim_agents',
                               '--hosts', str(self.hosts)])

    def kill(self, name, sig=signal.SIGKILL):
        process = self.processes.pop(name)
        os.killpg(process.pid, sig)
        process.wait()

    def stop(self):
        for name in list(self.processes):
            self.kill(name, signal.SIGTERM if name == 'agents'
                      else signal.SIGKILL)

    def log(self, name):
        return os.path.join(self.state_dir, '%s.log' % name)

    def log_text(self, name):
        try:
            with open(self.log(name), errors='replace') as log:
                return log.read()
        except FileNotFoundError:
            return ''

    def cpu_seconds(self, name):
        """User and system CPU the process used so far."""
        with open('/proc/%d/stat' % self.processes[name].pid) as stat:
            fields = stat.read().rsplit(')', 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf(
            'SC_CLK_TCK')

    # What the logs say.

    def leaders(self, job):
        """Controllers in the order they took ``job``."""
        taken = []
        for name in self.controller_names():
            for line in self.log_text(name).splitlines():
                match = JOB_TAKEN.search(line)
                if match and match.group(2) == job:
                    taken.append((line[:23], match.group(1)))
        return [name for _stamp, name in sorted(taken)]

    def controller_names(self):
        return sorted(name[:-len('.log')]
                      for name in os.listdir(self.state_dir)
                      if name.startswith('controller-')
                      and name.endswith('.log'))

    def host_shares(self):
        """{controller: (hosts it serves, of how many, [the service
        processes it sees])}, as each last logged it."""
        shares = {}
        for name in self.controller_names():
            for line in self.log_text(name).splitlines():
                match = HOST_SHARE.search(line)
                if match:
                    shares[name] = (int(match.group(2)),
                                    int(match.group(3)),
                                    match.group(4).split(', '))
        return shares

    def optimizer_runs(self):
        """{controller: [(decisions, CPU seconds) per run]}."""
        runs = {}
        for name in self.controller_names():
            runs[name] = [(int(m.group(1)), float(m.group(2)))
                          for m in OPTIMIZER_RUN.finditer(
                              self.log_text(name))]
        return runs

    def duplicate_sends(self):
        """Actions the agents received again after applying them."""
        return self.log_text('agents').count(APPLIED_AGAIN)


def enable_memory_servers(context):
    """The operator's steps memcanal-aio takes: admit the hosts to
    pooling and let their memory servers lend."""
    for server in pooling_db.list_memory_servers(context):
        pooling_db.set_admitted(context, server['host_uuid'], True)
        if not server['enabled']:
            pooling_db.set_enabled(context, server['uuid'], True)


def _events(context):
    with decisions_db.db_api.context_manager.reader.using(context) as s:
        return s.execute(
            sa.select(models.DecisionEvent.id, models.Decision.id,
                      models.Decision.host_id, models.Decision.peer_host_id,
                      models.DecisionEvent.to_state,
                      models.DecisionEvent.created_at)
            .join(models.Decision,
                  models.Decision.id == models.DecisionEvent.decision_id)
            .order_by(models.DecisionEvent.id)).all()


def overlapping_decisions(context):
    """Pairs of decisions carried out at once on one host (decisions_db:
    at most one may be): by the order of their events, one approved
    before the other ended. Event ids follow the commits of each host's
    decisions, which the host's lock serialises."""
    acting = {}
    overlaps = []
    for _id, decision, host, peer, to_state, _at in _events(context):
        for host_id in filter(None, (host, peer)):
            current = acting.get(host_id)
            if to_state in decisions_db.IN_FLIGHT:
                if current not in (None, decision):
                    overlaps.append((current, decision))
                acting[host_id] = decision
            elif current == decision:
                acting[host_id] = None
    return overlaps


def in_flight_since(context, seconds):
    """Decisions being carried out for more than ``seconds``."""
    started = {}
    for _id, decision, _h, _p, to_state, at in _events(context):
        if to_state in decisions_db.IN_FLIGHT:
            started[decision] = at
        else:
            started.pop(decision, None)
    now = timeutils.utcnow()
    return [d for d, at in started.items()
            if (now - at).total_seconds() > seconds]


def recommendation_lifetimes(context):
    """{state: [seconds]}: how long each recommendation waited before it
    was superseded, approved or rejected; and how many still wait."""
    recommended, lifetimes = {}, collections.defaultdict(list)
    for _id, decision, _h, _p, to_state, at in _events(context):
        if to_state == 'recommended':
            recommended[decision] = at
        elif decision in recommended:
            lifetimes[to_state].append(
                (at - recommended.pop(decision)).total_seconds())
    return lifetimes, len(recommended)


def median(values):
    return statistics.median(values) if values else None


def state_counts(context):
    with decisions_db.db_api.context_manager.reader.using(context) as s:
        return collections.Counter(dict(s.execute(
            sa.select(models.Decision.state,
                      sa.func.count(models.Decision.id))
            .group_by(models.Decision.state)).all()))


def stored_reports(context):
    with decisions_db.db_api.context_manager.reader.using(context) as s:
        return s.execute(sa.select(sa.func.count(
            models.HostReport.id))).scalar_one()


def admin():
    return memcanal_context.get_admin_context()


def wait(predicate, timeout, interval=0.5):
    """``predicate()`` once true, or None after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)

_CONFIG = '''[DEFAULT]
transport_url = %(transport_url)s
control_exchange = %(exchange)s
state_path = %(state_dir)s
[database]
connection = %(db_url)s
[coordination]
%(backend)s[agent]
driver = simulated
report_interval = %(report_interval)s
register_timeout = 5
service_public_key = %(public)s
[simulated]
instances = %(vms)d
host_memory_mb_by_host = sim-host-1:2700
memserver_mb = 4096
file_server_memory_ratio = 2.0
references_per_interval = 2000
[estimation]
prl_stability_window = %(hold)s
esx_period = %(hold)s
[migration]
enabled = true
executor = agent
hold_seconds = %(hold)s
min_gain_mb = 16
[pooling]
enabled = true
min_page_mb = 16
[optimizer]
mode = %(mode)s
optimize_interval = %(optimize_interval)s
hold_seconds = %(hold)s
max_step_fraction = 0.25
default_mechanism = hotplug
[service]
periodic_interval = 1
signing_key = %(private)s
[retention]
run_interval = 10
'''
