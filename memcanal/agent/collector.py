"""Per-VM estimation in the agent: a driver's Sample in, report fields out.

Each VM gets one InstanceCollector for as long as it runs, because the
estimators are stateful: PRL's cumulative buffer and hot-page history, the
PML dirty bits, ESX's sample, the window of the miss-ratio curves. It runs
memcanal.estimation's VmObserver, the same pipeline memcanal-trace and the
benchmarks use, once per report interval (the estimators' mu). Where the
driver's pager samples the VM's accesses, a SampledAccesses
(memcanal.estimation.sampling) turns its intervals into the "sampled"
working set and fault-rate curve.
"""

import dataclasses
import math
import zlib

from memcanal.agent import tracing
from memcanal.agent import write_log
from memcanal.estimation import intervals
from memcanal.estimation import mrc
from memcanal.estimation import observer
from memcanal.estimation import packed_curve
from memcanal.estimation import sampling

SAMPLED = 'sampled'
SAMPLED_WRITE = 'sampled_write'


def settings(conf, page_size):
    """The observer's settings from [estimation] and [agent]."""
    options = conf.estimation
    return observer.Settings(
        tau=options.prl_tau, omega_s=options.prl_stability_window,
        mu_s=conf.agent.report_interval,
        epsilon_bytes=options.guest_kernel_footprint_mb * 2 ** 20,
        log_entries=options.log_entries, tlb_entries=options.tlb_entries,
        esx_sample_pages=options.esx_sample_pages,
        esx_period_s=options.esx_period, page_size=page_size)


def packed_curves(curves):
    """Points by method as a report carries them since RPC 1.4: packed,
    one string per curve (memcanal.estimation.packed_curve)."""
    return {method: packed_curve.pack(points)
            for method, points in curves.items()}


def report_stats(stats):
    """LogStats by log name as a report's ``logs`` (memcanal.rpc.reports)."""
    return {name: {field.name: int(getattr(log, field.name))
                   for field in dataclasses.fields(log)}
            for name, log in stats.items()}


class InstanceCollector:
    """The estimators of one VM of ``memory_bytes``."""

    def __init__(self, conf, instance_uuid, memory_bytes, page_size):
        options = conf.estimation
        self.page_size = page_size
        self.max_mrc_points = conf.agent.max_mrc_points
        self.observer = observer.VmObserver(
            max(1, memory_bytes // page_size), settings(conf, page_size),
            seed=zlib.crc32(instance_uuid.encode()))
        self.curves = [mrc.WindowedCurve(
            method, options.mrc_window, options.shards_rate,
            options.shards_max_pages, universe=memory_bytes // page_size)
            for method in options.mrc_methods]
        self.tracing = tracing.CacheTracing(conf, page_size)
        self.paging = tracing.PagingCurve(options.mrc_window,
                                          self.max_mrc_points, page_size)
        self._now_ns = 0
        self._conf = conf
        self._pages = memory_bytes // page_size
        self.sampled = None
        self._memory_bytes = memory_bytes
        # The estimators of a hypervisor's write log, from its first one.
        self.write_log = None
        # The latest Sample's driver.AccessSamples (None without one):
        # the pages the pager saw accessed, interval by interval, for a
        # paging detector (memcanal.estimation.sampling.ColdPageFeed).
        self.accesses = None

    def collect(self, sample):
        """WSS by estimator, MRC by method and what the logs did, after one
        more interval.

        Real logs (``sample.logs``) go straight to the handlers; a trace
        goes through the emulated logs first. A sample with neither (a
        driver that cannot see references) yields only its guest
        statistics and any hypervisor-cache or paging curve. Estimators
        that have not converged yet are left out of ``wss``. Whatever
        else it holds, a sample with sampled accesses (``accesses``) adds
        the "sampled" working sets (``sampled``: over PRL's window;
        ``sampled_write``: written), curve, and statistics. A
        hypervisor's write log (``write_log``) gives the
        ``<source>_logdirty`` working set and write curve.
        """
        if sample.logs is not None:
            logs = sample.logs
            summary = self.handle_logs(logs.prl_gpas, logs.pml_gpas,
                                       logs.now_ns, logs.dirty_log)
            summary['logs'] = report_stats(logs.stats)
        elif sample.trace is not None:
            prl, pml = self.observer.emulate(sample.trace)
            self.observer.esx.feed(sample.trace)
            if len(sample.trace):
                trace = sample.trace
                self._now_ns = int(trace.times[-1]) * trace.time_unit_ns + 1
            summary = self.handle_logs(prl.gpas, pml.gpas, self._now_ns)
            summary['logs'] = report_stats({'prl': prl.stats,
                                            'pml': pml.stats})
        elif sample.write_log is not None:
            summary = self._write_log(sample.write_log)
        else:
            summary = {'wss': {}, 'mrc': {}}
        self.tracing.add(sample.cache_trace)
        self.paging.add(sample.paging_trace)
        summary['mrc'].update(self.tracing.curves())
        summary['mrc'].update(self.paging.curves())
        guest_stats = sample.guest_stats
        self.accesses = sample.accesses
        if self._add_accesses(sample.accesses):
            guest_stats = dict(guest_stats, **self._sampled_stats())
            self._report_sampled(summary)
        return dict(summary, guest_stats=guest_stats,
                    mrc=packed_curves(summary['mrc']))

    def _write_log(self, log):
        if self.write_log is None:
            self.write_log = write_log.WriteLogEstimators(
                self._conf, self._memory_bytes, self.page_size, log.source)
        return self.write_log.collect(log)

    def _add_accesses(self, accesses):
        """Add the sampled intervals, each with its sample (the pager's
        rate changes as the agent adapts it); whether the VM has been
        sampled. The estimators start with the first interval."""
        if accesses is None:
            return self.sampled is not None
        if self.sampled is None and accesses.intervals:
            self.sampled = self._sampled_accesses(accesses)
        for interval in accesses.intervals:
            self.sampled.add_interval(
                interval.touched, interval.written, interval.full,
                interval.seconds,
                accesses.rate if interval.rate is None else interval.rate,
                accesses.salt if interval.salt is None else interval.salt)
        return self.sampled is not None

    def _sampled_accesses(self, accesses):
        """A SampledAccesses for the pager's intervals, PRL's window in
        intervals of the length they last."""
        seconds = [interval.seconds for interval in accesses.intervals]
        interval_s = (sum(seconds) / len(seconds)
                      or self._conf.agent.report_interval)
        options = self._conf.estimation
        return sampling.SampledAccesses(
            self._pages, accesses.rate, accesses.salt, interval_s,
            max(1, math.ceil(options.prl_stability_window / interval_s
                             - 1e-9)),
            self.page_size, options.sampling_window,
            options.sampling_max_reuse, intervals.CONFIDENCE,
            self._conf.sampling.systematic_pages)

    def _report_sampled(self, summary):
        """The sampled working sets, curve and their 95 % intervals
        (RPC 1.7: ``wss_bounds``, ``mrc_bands``)."""
        bounds = summary.setdefault('wss_bounds', {})
        for name, size, kind in (
                (SAMPLED, self.sampled.window_wss_bytes(), 'touched'),
                (SAMPLED_WRITE, self.sampled.written_wss_bytes(),
                 'written')):
            if size is not None:
                summary['wss'][name] = size
                bounds[name] = self.sampled.window_bounds(kind)[0]
        band = self.sampled.curve_band()
        if band is not None:
            summary['mrc'][SAMPLED] = band.curve.compact(
                self.max_mrc_points, self.page_size)
            summary.setdefault('mrc_bands', {})[SAMPLED] = {
                edge: packed_curve.pack(getattr(band, edge).compact(
                    self.max_mrc_points, self.page_size))
                for edge in ('low', 'high')}

    def _sampled_stats(self):
        """Sampling's guest statistics: first touches per second of the
        whole VM (a sampled curve's ratio times it is faults per second),
        the rate of the last interval, the intervals' length, the
        sampled pages behind the window's working set and the intervals'
        confidence."""
        stats = {'sampling_rate': self.sampled.rate,
                 'sampling_interval_s': self.sampled.interval_s,
                 'sampling_confidence': self.sampled.confidence}
        window = self.sampled.window_bounds()
        if window is not None:
            stats['sampled_pages'] = window[1]
        touches = self.sampled.touches_per_s()
        if touches is not None:
            stats['sampled_touches_per_s'] = touches
        return stats

    def handle_logs(self, prl_gpas, pml_gpas, now_ns, dirty_log=None):
        """The agent's own work for one interval of delivered logs: the
        log-full handlers, one estimator iteration, the curves.
        ``dirty_log`` is the VM's PML log when it is not emulated."""
        self.observer.handle(prl_gpas, pml_gpas)
        self.observer.iterate(now_ns, dirty_log)
        curves = {}
        for window in self.curves:
            window.add(prl_gpas)
            curve = window.curve()
            if curve is not None:
                curves[window.method] = curve.compact(self.max_mrc_points,
                                                      self.page_size)
        return {'wss': self.observer.estimates(), 'mrc': curves}
