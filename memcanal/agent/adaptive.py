"""The sampling rate of each VM, set by the agent every interval.

A hashed sample's error is its size's: about 1 / sqrt(r x WSS)
(memcanal.estimation.intervals). One rate for every VM is too low for
the small and quiet ones (a 1 % sample of 650 pages holds 6) and more
than the busy ones need, so after every collection the agent picks each
sampling VM's rate for its next intervals ([sampling] target_error,
min_rate, max_rate), keeps the faults it costs within a budget per VM
and per host, and tells the driver, whose pager takes it at its next
interval without a restart. Every ``resalt_every`` intervals it also
draws each VM a new sample (another salt). The policy itself is the
pure functions of memcanal.estimation.intervals; this keeps what they
need between intervals.
"""

import zlib

from oslo_log import log as logging

from memcanal.estimation import intervals
from memcanal.estimation import mrc

LOG = logging.getLogger(__name__)


def initial_rate(options):
    """The rate a VM's sampling starts at ([sampling] options): with the
    adaptive rate, ``max_rate``, so that its first interval, which the
    window and the curve count for as long as they last (at their
    intervals' lowest rate), is drawn large rather than at the floor;
    the agent lowers it after that interval. It costs what a full pass
    costs, once. Else ``rate``."""
    if options.target_error > 0:
        return options.max_rate
    return options.rate


def salt_for(instance_uuid, draw):
    """The salt of a VM's ``draw``-th sample (0: mrc.DEFAULT_SALT, the
    pager's own): different VMs, and successive draws, hash apart."""
    if not draw:
        return mrc.DEFAULT_SALT
    return zlib.crc32(('%s/%d' % (instance_uuid, draw)).encode()) or 1


class SamplingRates:
    """The rates and salts the agent gave each VM's sampling."""

    def __init__(self, options):
        self.options = options
        self.enabled = bool(options.enabled and options.target_error > 0)
        self._chosen = {}       # uuid -> (rate, salt)
        self._collections = {}  # uuid -> collections since its first

    def plan(self, collectors):
        """{uuid: (rate, salt)} for every VM whose sample should change,
        from ``collectors`` {uuid: collector.InstanceCollector} (those
        not sampled are left alone)."""
        if not self.enabled:
            return {}
        options = self.options
        wanted, touches = {}, {}
        for uuid, collector in collectors.items():
            sampled = collector.sampled if collector is not None else None
            if sampled is None:
                continue
            low = sampled.recent_low_pages()
            touches[uuid] = sampled.touches_per_s()
            current = self._chosen.get(uuid, (sampled.rate, None))[0]
            wanted[uuid] = intervals.choose_rate(
                current, low or 0.0, options.target_error, options.min_rate,
                options.max_rate, touches[uuid],
                options.vm_fault_budget or None)
        rates = intervals.fit_host_budget(
            wanted, touches, options.host_fault_budget or None,
            options.min_rate, options.max_rate)
        changes = {}
        for uuid, rate in rates.items():
            count = self._collections.get(uuid, 0) + 1
            self._collections[uuid] = count
            salt = collectors[uuid].sampled.salt
            if options.resalt_every and count % options.resalt_every == 0:
                salt = salt_for(uuid, count // options.resalt_every)
            if (rate, salt) != (collectors[uuid].sampled.rate,
                                collectors[uuid].sampled.salt):
                changes[uuid] = (rate, salt)
            self._chosen[uuid] = (rate, salt)
        for uuid in set(self._chosen) - set(collectors):
            del self._chosen[uuid]
            self._collections.pop(uuid, None)
        return changes
