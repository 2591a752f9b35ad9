"""``GET /metrics``: the cloud's memory for Prometheus, read from the
database at each scrape.

Served without a token when ``[api] metrics_enabled`` is on, a 404 when
it is off (memcanal.api.auth lets the path through): Prometheus sends no
keystone token, and the series name hosts, instances and projects, so
the operator opens it only where the monitoring network alone reaches it
(doc/monitoring.md). Every API process reads the same rows, so a scrape
through the API's load balancer sees one cloud, however many
controllers serve it.

Names follow Prometheus's conventions: the ``memcanal_`` prefix, base
units (``_bytes``, ``_seconds``), ``_total`` on counters only, ratios in
0..1 (but the allocation ratio, placement's overcommit factor). Labels
are bounded: ``host`` (a host's name), ``instance`` (a live VM's uuid:
its series go when the VM is marked deleted, as libvirt's exporter drops
a domain that stops), ``project``, and names from small fixed sets
(``kind``, ``state``, ``code``, ``estimator``, ``method``).
"""

import calendar

import numpy as np
import prometheus_client
from prometheus_client import core
from prometheus_client import exposition
import webob
import webob.exc

from memcanal.api import errors
from memcanal.api import util
from memcanal import context as memcanal_context
from memcanal.db import metrics as metrics_db
from memcanal.estimation import mrc

HOST_BYTES = {
    'memory_total_bytes': 'Memory of the host, as its agent registered it.',
    'capacity_bytes': 'Memory the host\'s VMs may use: total less '
                      'reserved.',
    'demand_bytes': 'What the host\'s live VMs measurably need: each '
                    'one\'s working set plus its kernel, or all its memory '
                    'when unmeasured.',
    'headroom_bytes': 'Capacity less measured demand (negative: hot).',
    'allocated_bytes': 'Memory of the host\'s live VMs (flavor sizes).',
    'resident_bytes': 'What the host\'s VMs hold resident: their memory '
                      'less what memory pooling pages out.',
    'lent_bytes': 'Memory the host\'s memory server lends to other '
                  'hosts\' VMs.',
    'borrowed_bytes': 'Memory the host\'s VMs borrow from other hosts\' '
                      'memory servers.',
}
INSTANCE_BYTES = {
    'allocated_bytes': 'Memory of the VM (its flavor).',
    'target_bytes': 'Memory target memcanal set (balloon or hotplug); '
                    'absent: none set.',
    'resident_bytes': 'What the VM holds resident, as its pager last '
                      'said; absent: no pager holds it.',
    'paged_bytes': 'What the VM\'s pager moved to another host\'s memory '
                   'server; absent: no pager holds it.',
}
HOST_LABELS = ['host']
INSTANCE_LABELS = ['instance', 'host', 'project']


def _gauge(name, documentation, labels):
    return core.GaugeMetricFamily('memcanal_' + name, documentation,
                                  labels=labels)


def _host_families(hosts):
    families = []
    up = _gauge('host_up', '1 while the host\'s agent reports within its '
                'heartbeats, else 0.', HOST_LABELS)
    count = _gauge('host_instances', 'Live VMs on the host.', HOST_LABELS)
    heartbeat = _gauge('host_last_heartbeat_timestamp_seconds',
                       'When the host last reported or registered (Unix '
                       'time).', HOST_LABELS)
    utilization = _gauge('host_utilization_ratio', 'Measured demand over '
                         'capacity (absent without capacity).', HOST_LABELS)
    ratio = _gauge('host_allocation_ratio', 'The MEMORY_MB allocation '
                   'ratio memcanal set in placement (absent: none set).',
                   HOST_LABELS)
    for host in hosts:
        name = [host['name']]
        up.add_metric(name, host['state'] == 'up')
        count.add_metric(name, host['instance_count'])
        if host['last_heartbeat_at'] is not None:
            heartbeat.add_metric(name, calendar.timegm(
                host['last_heartbeat_at'].utctimetuple()))
        if host['utilization'] is not None:
            utilization.add_metric(name, host['utilization'])
        if host['allocation_ratio'] is not None:
            ratio.add_metric(name, host['allocation_ratio'])
    families.extend([up, count, heartbeat, utilization, ratio])
    for key, documentation in HOST_BYTES.items():
        family = _gauge('host_' + key, documentation, HOST_LABELS)
        for host in hosts:
            family.add_metric([host['name']], host[key])
        families.append(family)
    return families


def _instance_families(instances):
    families = []
    for key, documentation in INSTANCE_BYTES.items():
        family = _gauge('instance_' + key, documentation, INSTANCE_LABELS)
        for instance in instances:
            if instance[key] is not None:
                family.add_metric(_instance_labels(instance), instance[key])
        families.append(family)
    wss = _gauge('instance_working_set_bytes', 'The VM\'s working set in '
                 'its newest report, by estimator.',
                 INSTANCE_LABELS + ['estimator'])
    bounds = _gauge('instance_working_set_bound_bytes', 'The 95 % '
                    'interval of a sampled working set in the VM\'s newest '
                    'report, by estimator: its low and high ends.',
                    INSTANCE_LABELS + ['estimator', 'bound'])
    demand = _gauge('instance_demand_bytes', 'What the VM measurably '
                    'needs, as its host\'s demand counts it: its working '
                    'set\'s upper bound plus the guest kernel, no more '
                    'than its memory; all its memory when unmeasured.',
                    INSTANCE_LABELS)
    miss = _gauge('instance_miss_ratio', 'Miss (or fault) ratio at the '
                  'VM\'s memory (what its guest reached, else its target, '
                  'else its flavor) on its newest report\'s miss-ratio '
                  'curve, by method.', INSTANCE_LABELS + ['method'])
    demand_miss = _gauge('instance_demand_miss_ratio', 'Miss (or fault) '
                         'ratio at the VM\'s measured demand on its newest '
                         'report\'s miss-ratio curve, by method.',
                         INSTANCE_LABELS + ['method'])
    for instance in instances:
        labels = _instance_labels(instance)
        demand.add_metric(labels, instance['demand_bytes'])
        for estimator, value in sorted(instance['wss'].items()):
            wss.add_metric(labels + [estimator], value)
        for estimator, ends in sorted(instance['wss_bounds'].items()):
            for bound, value in zip(('low', 'high'), ends):
                bounds.add_metric(labels + [estimator, bound], value)
        for method, points in sorted(instance['mrc'].items()):
            if points:
                miss.add_metric(labels + [method], miss_ratio_at(
                    points, instance['memory_bytes']))
                demand_miss.add_metric(labels + [method], miss_ratio_at(
                    points, instance['demand_bytes']))
    families.extend([demand, wss, bounds, miss, demand_miss])
    return families


def miss_ratio_at(points, size_bytes):
    """The curve's ([[bytes, miss ratio], ...]) miss ratio at
    ``size_bytes``, as the optimizer reads curves (mrc.MissRatioCurve)."""
    sizes, ratios = np.asarray(points, dtype=float).T
    return float(mrc.MissRatioCurve(sizes, ratios, 0).at(size_bytes))


def _instance_labels(instance):
    return [instance['uuid'], instance['host'], instance['project_id']]


def _count_families(scraped):
    decisions = _gauge('decisions', 'Decisions now in each state, by '
                       'kind.', ['kind', 'state'])
    for kind, state, count in scraped['decisions']:
        decisions.add_metric([kind, state], count)
    transitions = core.CounterMetricFamily(
        'memcanal_decision_transitions', 'Decisions that entered each '
        'state (recommended, approved, applied, ...), by kind, from their '
        'audit trail; retention\'s purge lowers it.',
        labels=['kind', 'state'])
    for kind, state, count in scraped['transitions']:
        transitions.add_metric([kind, state], count)
    rejections = core.CounterMetricFamily(
        'memcanal_report_rejections', 'Agent messages the service '
        'rejected or refused, by code, as stored.', labels=['code'])
    for code, count in scraped['rejections']:
        rejections.add_metric([code], count)
    return [decisions, transitions, rejections]


class DatabaseCollector:
    """A prometheus_client collector of one scrape of the database."""

    def __init__(self, per_instance):
        self.per_instance = per_instance

    def collect(self):
        scraped = metrics_db.scrape(memcanal_context.get_admin_context(),
                                    per_instance=self.per_instance)
        yield from _host_families(scraped['hosts'])
        if self.per_instance:
            yield from _instance_families(scraped['instances'])
        yield from _count_families(scraped)


@util.wsgify
def show(req):
    options = req.environ[util.ENV_CONF].api
    if not options.metrics_enabled:
        raise webob.exc.HTTPNotFound(
            'No resource at %s.' % util.quoted_path(req.environ),
            comment=errors.ROUTE_NOT_FOUND)
    registry = prometheus_client.CollectorRegistry(auto_describe=False)
    registry.register(DatabaseCollector(options.metrics_per_instance))
    response = webob.Response(body=prometheus_client.generate_latest(
        registry))
    # The text format every Prometheus reads (2.x does not know 1.0.0).
    response.headers['Content-Type'] = exposition.CONTENT_TYPE_PLAIN_0_0_4
    return response


# The handlers answering something else than JSON.
HANDLERS = (show,)
