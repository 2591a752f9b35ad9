"""What the hypervisor runs for one VM: logs, log-full handlers, estimators.

``VmObserver`` is the one pipeline the compute agent, ``memcanal-trace``
and the benchmarks share: references go through the PRL and PML log
emulation, full logs through the handlers into the PRL and PML
estimators, page faults on sampled pages into ESX sampling; ``iterate``
is the estimators' observation interval (mu).
"""

import dataclasses

import numpy as np

from memcanal import estimation
from memcanal.estimation import logsim
from memcanal.estimation import wss


@dataclasses.dataclass(frozen=True)
class Settings:
    """The parameters, with the PRL paper's values as defaults."""

    tau: int = wss.PRL_TAU
    omega_s: float = wss.PRL_OMEGA_S
    mu_s: float = wss.PRL_MU_S
    epsilon_bytes: int = 0
    log_entries: int = logsim.LOG_ENTRIES
    tlb_entries: int = logsim.TLB_ENTRIES
    handler_base_ns: int = logsim.HANDLER_BASE_NS
    handler_entry_ns: int = logsim.HANDLER_ENTRY_NS
    esx_sample_pages: int = wss.ESX_SAMPLE_PAGES
    esx_period_s: float = wss.ESX_PERIOD_S
    page_size: int = estimation.PAGE_SIZE


class VmObserver:
    """One VM of ``memory_pages`` pages under PRL, PML and ESX sampling."""

    def __init__(self, memory_pages, settings=Settings(), seed=0):
        self.settings = settings
        log_options = dict(log_entries=settings.log_entries,
                           handler_base_ns=settings.handler_base_ns,
                           handler_entry_ns=settings.handler_entry_ns)
        self.prl_log = logsim.PrlLog(tlb_entries=settings.tlb_entries,
                                     **log_options)
        self.pml_log = logsim.PmlLog(**log_options)
        self.prl = wss.PrlWss(settings.tau, settings.omega_s, settings.mu_s,
                              settings.epsilon_bytes, settings.page_size)
        self.pml = wss.PmlWss(settings.page_size)
        self.esx = wss.EsxSampling(
            memory_pages, np.random.default_rng(seed),
            settings.esx_sample_pages, settings.esx_period_s,
            settings.page_size)

    def emulate(self, trace):
        """What the hardware gives for ``trace``: the PRL and PML logs'
        deliveries."""
        return self.prl_log.feed(trace), self.pml_log.feed(trace)

    def handle(self, prl_gpas, pml_gpas):
        """The log-full handlers: accumulate the full logs' GPAs."""
        self.prl.handle(prl_gpas)
        self.pml.handle(pml_gpas)

    def observe(self, trace):
        """Run ``trace`` through the logs, handlers and ESX sampling;
        return the PRL delivery (the GPAs handled, input of the MRC)."""
        prl, pml = self.emulate(trace)
        self.handle(prl.gpas, pml.gpas)
        self.esx.feed(trace)
        return prl

    def iterate(self, now_ns, dirty_log=None):
        """One observation interval has passed (at ``now_ns``).

        The PML estimator reads the partial logs too, as KVM's dirty-log
        sync does, of ``dirty_log`` (the emulated PML log unless real logs
        came from elsewhere); PRL's handler only ever sees full logs.
        """
        dirty_log = dirty_log or self.pml_log
        self.prl.iterate()
        self.pml.handle(dirty_log.flush())
        if self.pml.iterate() is not None:
            dirty_log.clear_dirty()
        self.esx.advance(now_ns)

    def estimates(self):
        """The latest estimate of each estimator that has one, bytes."""
        return {estimator.name: estimator.estimate
                for estimator in (self.prl, self.pml, self.esx)
                if estimator.estimate is not None}

    def log_stats(self):
        return {'prl': self.prl_log.stats.as_dict(),
                'pml': self.pml_log.stats.as_dict()}


def replay(trace, observer, until_converged=False):
    """Feed ``trace`` one observation interval (mu) at a time.

    Returns one entry per iteration: its time, PRL's hot pages, and each
    estimate so far. With ``until_converged`` it stops once PRL and PML
    have both given an estimate.
    """
    times = trace.times_ns()
    mu_ns = int(observer.settings.mu_s * 1e9)
    timeline, start = [], 0
    now = (int(times[0]) // mu_ns + 1) * mu_ns if len(times) else 0
    while start < len(times):
        stop = int(np.searchsorted(times, now))
        observer.observe(trace.slice(start, stop))
        hot = observer.prl.buffer.pages_logged_at_least(
            observer.settings.tau)
        observer.iterate(now)
        timeline.append(dict(time_s=now / 1e9, prl_hot_pages=hot,
                             **observer.estimates()))
        start, now = stop, now + mu_ns
        if until_converged and observer.prl.rounds and observer.pml.rounds:
            break
    return timeline
