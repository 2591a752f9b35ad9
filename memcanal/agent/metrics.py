"""What one memcanal-agent saw of its own node, for Prometheus.

The API's GET /metrics shows the cloud as the service stored it; what
only the agent knows is here ([agent] metrics_port): its VMs' pagers
(faults, their latency, paged and resident bytes), what their sampling
costs (the rate and the first touches per second it sees, each one a
minor fault in the guest), and how long a collection takes. Each agent
serves its own node, so each is a Prometheus target.

The per-VM series carry ``instance`` (the VM's uuid) and follow the
VMs the agent's last collection listed: a VM that left is gone from the
next scrape, so the series are bounded by the node's live VMs. Its
counters start at zero with the agent (and with a VM's first
collection), which rate() takes as a reset.
"""

import threading

import prometheus_client
from prometheus_client import core

# Seconds to collect, estimate and build one report: milliseconds for a
# few idle VMs, seconds for many sampled ones.
COLLECTION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
                      5.0, 10.0, 30.0, 60.0)
# The pager's fault latency quantiles, as its stats say them
# (fault_p50_us, fault_p99_us), in guest_stats as seconds.
FAULT_QUANTILES = {'0.5': 'paging_fault_p50_seconds',
                   '0.99': 'paging_fault_p99_seconds'}
LABELS = ['instance']
# Why the agent refuses a cast (memcanal.agent.manager), counted from 0.
REFUSALS = ('rpc.bad_signature', 'rpc.stale', 'rpc.replayed',
            'rpc.unstamped')


class AgentMetrics:
    """The node's metrics, in a registry of their own (the agent's
    alone: no process_* or python_* series), updated by ``observe``
    after every collection and read at each scrape."""

    def __init__(self):
        self.registry = prometheus_client.CollectorRegistry()
        self.collection_seconds = prometheus_client.Histogram(
            'memcanal_agent_collection_seconds',
            'Seconds the agent took to collect, estimate and build one '
            'report of its node.', buckets=COLLECTION_BUCKETS,
            registry=self.registry)
        # Casts of the service the agent refused, by code (a signature
        # not the service's for this host, or not fresh:
        # memcanal.rpc.freshness).
        self._refused = prometheus_client.Counter(
            'memcanal_agent_refused_casts',
            'Casts to this agent it refused, by code: rpc.bad_signature '
            '(not signed by the service for this host), rpc.stale (sent '
            'outside [rpc] replay_window), rpc.replayed (seen before), '
            'rpc.unstamped (not stamped fresh, from a service that '
            'stamps).', ['code'], registry=self.registry)
        for code in REFUSALS:
            self._refused.labels(code)
        self._lock = threading.Lock()
        self._entries = {}          # uuid -> the last report's entry
        self._faults = {}           # uuid -> faults since first seen
        self._fault_seconds = {}    # uuid -> seconds in faults, ditto
        self.registry.register(self)

    def refused(self, code):
        """Count a cast refused for ``code``."""
        self._refused.labels(code).inc()

    def refused_count(self, code):
        return self.registry.get_sample_value(
            'memcanal_agent_refused_casts_total', {'code': code}) or 0

    def observe(self, report, seconds):
        """Take a built ``report`` (memcanal.rpc.reports) of the node's
        live VMs and the ``seconds`` it took."""
        self.collection_seconds.observe(seconds)
        entries = {entry['uuid']: entry for entry in report['instances']}
        with self._lock:
            self._entries = entries
            for counts in (self._faults, self._fault_seconds):
                for uuid in set(counts) - set(entries):
                    del counts[uuid]
            for uuid, entry in entries.items():
                paging = entry.get('paging')
                stats = entry.get('guest_stats', {})
                if paging is not None:
                    self._faults[uuid] = (self._faults.get(uuid, 0)
                                          + paging['faults'])
                if 'paging_fault_seconds' in stats:
                    self._fault_seconds[uuid] = (
                        self._fault_seconds.get(uuid, 0.0)
                        + stats['paging_fault_seconds'])

    def describe(self):
        return []                   # names come from collect(), at scrape

    def collect(self):
        """The per-VM families, from the last collection (prometheus
        client's custom collector protocol)."""
        with self._lock:
            entries = dict(self._entries)
            faults = dict(self._faults)
            fault_seconds = dict(self._fault_seconds)
        families = {
            'faults': core.CounterMetricFamily(
                'memcanal_agent_pager_faults',
                'Remote-paging faults the VM\'s pager served since the '
                'agent started.', labels=LABELS),
            'fault_seconds': core.CounterMetricFamily(
                'memcanal_agent_pager_fault_seconds',
                'Seconds the VM\'s vCPUs waited on remote-paging faults '
                'since the agent started (drivers that count it: '
                'simulated).', labels=LABELS),
            'latency': core.GaugeMetricFamily(
                'memcanal_agent_pager_fault_latency_seconds',
                'Latency of the VM\'s remote-paging faults by quantile, '
                'over the pager\'s recent faults (memcanal-pager\'s '
                'stats).', labels=LABELS + ['quantile']),
            'paged': core.GaugeMetricFamily(
                'memcanal_agent_paged_bytes',
                'Memory of the VM its pager holds out of the node.',
                labels=LABELS),
            'resident': core.GaugeMetricFamily(
                'memcanal_agent_resident_bytes',
                'Memory of the VM resident on the node while it is paged.',
                labels=LABELS),
            'rate': core.GaugeMetricFamily(
                'memcanal_agent_sampling_ratio',
                'Fraction of the VM\'s pages its pager samples (the rate '
                'the agent set for its intervals).', labels=LABELS),
            'touches': core.GaugeMetricFamily(
                'memcanal_agent_sampled_touches_per_second',
                'First touches of sampled pages per second, scaled to '
                'the whole VM: what sampling costs in guest faults.',
                labels=LABELS),
        }
        for uuid in sorted(entries):
            paging = entries[uuid].get('paging')
            stats = entries[uuid].get('guest_stats', {})
            if paging is not None:
                families['faults'].add_metric([uuid], faults.get(uuid, 0))
                families['paged'].add_metric([uuid], paging['paged_bytes'])
                families['resident'].add_metric([uuid],
                                                paging['resident_bytes'])
            if uuid in fault_seconds:
                families['fault_seconds'].add_metric([uuid],
                                                     fault_seconds[uuid])
            for quantile, key in FAULT_QUANTILES.items():
                if key in stats:
                    families['latency'].add_metric([uuid, quantile],
                                                   stats[key])
            if 'sampling_rate' in stats:
                families['rate'].add_metric([uuid], stats['sampling_rate'])
            if 'sampled_touches_per_s' in stats:
                families['touches'].add_metric(
                    [uuid], stats['sampled_touches_per_s'])
        # Families without a VM are left out, as an empty family says
        # nothing.
        return [family for family in families.values() if family.samples]
