"""Measured demand and whether a host takes one more VM.

What the scheduler filter admits, what the weigher prefers, the
overcommit ratio set in placement and the migration planner's moves all
read a host the same way, so that no plan moves a VM where the filter
would refuse it.

A VM's measured demand is its working set plus the guest kernel (the
floor the guardrails keep it above), or, before anything was measured,
all its memory. A host's is the sum over its VMs. A host takes a new VM
when both hold:

- headroom: its capacity (total memory less what is reserved) less its
  demand inflated by a safety ``margin`` fits the new VM's demand;
- U-tube's admission (eq. 7, Liu et al. section 3.4.2): the demand with
  the new VM stays at or under ``threshold`` (90 %) of the capacity.
"""

import dataclasses

from memcanal.policy import guardrails

DEFAULT_MARGIN = 0.1
DEFAULT_THRESHOLD = 0.9


def vm_demand(memory_bytes, wss_bytes, rails=guardrails.Rails()):
    """A VM's measured demand: its working set plus the kernel, no more
    than its memory; its memory when no working set was measured."""
    if wss_bytes is None:
        return int(memory_bytes)
    return int(min(wss_bytes + rails.kernel_bytes, memory_bytes))


@dataclasses.dataclass(frozen=True)
class HostLoad:
    """A host as placement decisions see it: what its VMs may use
    (``capacity_bytes``, total less reserved) and what they measurably
    need (``demand_bytes``)."""

    name: str
    capacity_bytes: int
    demand_bytes: int

    @property
    def utilization(self):
        """Measured demand over capacity (inf for a host with none)."""
        if self.capacity_bytes <= 0:
            return float('inf')
        return self.demand_bytes / self.capacity_bytes

    def headroom(self, margin=DEFAULT_MARGIN):
        """Capacity less the demand inflated by ``margin``."""
        return int(self.capacity_bytes - self.demand_bytes * (1 + margin))

    def with_demand(self, change_bytes):
        """The host after a VM of ``change_bytes`` of demand came (or,
        negative, left)."""
        return dataclasses.replace(
            self, demand_bytes=self.demand_bytes + int(change_bytes))


def accepts(host, new_demand_bytes, margin=DEFAULT_MARGIN,
            threshold=DEFAULT_THRESHOLD):
    """Whether ``host`` (a HostLoad) takes a VM of ``new_demand_bytes``:
    the headroom fits it and eq. 7 holds with it."""
    if host.capacity_bytes <= 0:
        return False
    return (host.headroom(margin) >= new_demand_bytes
            and host.with_demand(new_demand_bytes).utilization <= threshold)
