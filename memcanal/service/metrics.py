"""What one memcanal-service process ingested, for Prometheus.

The cloud's state (hosts, VMs, decisions) is read from the database by
the API's GET /metrics, the same from any process. What is here happens
in one process and nowhere else: the reports it took off the queue and
what became of them, how long storing them took, the pager faults their
VMs saw. Each service process serves its own ([service] metrics_port),
so each is a Prometheus target; sum over them for the cloud's
(doc/monitoring.md). Counters start at zero with the process, which
Prometheus's rate() and increase() take as a reset.
"""

import prometheus_client


# What became of a message a service process took off the queue
# (memcanal.service.manager): stored, already stored (a redelivery),
# rejected (invalid, stored as a rejection), failed (the database would
# not take it), refused (not signed by its host), and report entries
# left out (about VMs another host holds).
OUTCOMES = ('stored', 'duplicate', 'rejected', 'failed', 'refused',
            'left_out')
# Seconds from a report's arrival to its commit: a lone report on an
# idle database takes milliseconds, a batch behind a busy one seconds.
INGEST_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                  1.0, 2.5, 5.0, 10.0, 30.0)


class ServiceMetrics:
    """The process's metrics, in a registry of their own (so each
    ServiceManager, in tests several a process, counts from zero)."""

    def __init__(self):
        self.registry = prometheus_client.CollectorRegistry()
        self._outcomes = prometheus_client.Counter(
            'memcanal_service_reports',
            'Agent messages this service process took off the queue, by '
            'what became of them; left_out counts report entries.',
            ['outcome'], registry=self.registry)
        for outcome in OUTCOMES:
            self._outcomes.labels(outcome)
        self.ingest_seconds = prometheus_client.Histogram(
            'memcanal_service_report_ingest_seconds',
            'Seconds from a report\'s arrival in this process to its '
            'commit (validation, waiting for the batch, the transaction).',
            buckets=INGEST_BUCKETS, registry=self.registry)
        self._pager_faults = prometheus_client.Counter(
            'memcanal_service_pager_faults',
            'Remote-paging faults the VMs of a host saw, as its stored '
            'reports said, in reports this process stored.',
            ['host'], registry=self.registry)

    def count(self, outcome, count=1):
        self._outcomes.labels(outcome).inc(count)

    def outcomes(self):
        """{outcome: count} since the process started."""
        return {outcome: int(self.registry.get_sample_value(
            'memcanal_service_reports_total', {'outcome': outcome}))
            for outcome in OUTCOMES}

    def count_pager_faults(self, host, report):
        """Add the faults a stored ``report`` of ``host`` (its name)
        says its paged VMs saw in its interval."""
        faults = sum(sample.get('paging', {}).get('faults', 0)
                     for sample in report['instances'])
        if faults:
            self._pager_faults.labels(host).inc(faults)
