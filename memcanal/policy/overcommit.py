"""The memory overcommit ratio placement should hold for a host.

Placement admits allocations of flavor memory up to a compute node's
capacity (total less reserved) times its MEMORY_MB ``allocation_ratio``.
What fills the memory is not the flavors but what the VMs use. Over a
host's VMs, measured demand (demand.vm_demand: working set plus kernel,
all of its memory for a VM never measured) is a fraction ``d`` of their
flavor memory. If the VMs placement will still admit look like those
already there, a host filled up to ``capacity * ratio`` of flavor memory
demands ``capacity * ratio * d``; keeping that at U-tube's admission
threshold ``u`` (demand.DEFAULT_THRESHOLD, 90 %, the line the filter and
the weigher draw too) gives

    ratio = u / d.

VMs never measured count with all their memory, so they pull ``d``
towards 1 and the ratio towards ``u``: what is not known is not
overcommitted. The formula does not look at how full the host is now;
the filter, with each VM's own demand, keeps a host from taking a VM
that does not fit, the ratio only says how much flavor memory is worth
offering at all.

The answer then passes the operator's bounds, in order: it is clamped to
[min_ratio, max_ratio]; it moves at most max_step from the ratio
placement holds now, so a burst of idle VMs raises it over several
updates while their demand is watched (symmetric, so a ratio outside
new bounds also returns in steps); a change smaller than min_change is
not made, so measurement noise does not rewrite placement every period;
and a host with fewer than min_measured_instances measured VMs keeps its
ratio, as there is nothing to generalise from.
"""

import dataclasses

from memcanal.policy import demand
from memcanal.policy import guardrails

DIGITS = 3
"""Ratios are rounded to this many decimals: placement stores a float,
and an update repeated with the same inputs must find nothing to do."""
_EPSILON = 1e-9


@dataclasses.dataclass(frozen=True)
class Bounds:
    """The operator's limits on the ratio and on its moves."""

    min_ratio: float = 1.0
    max_ratio: float = 1.5
    max_step: float = 0.1
    min_change: float = 0.02
    target_utilization: float = demand.DEFAULT_THRESHOLD
    min_measured_instances: int = 1

    def __post_init__(self):
        if not 0 < self.min_ratio <= self.max_ratio:
            raise ValueError('need 0 < min_ratio <= max_ratio, got %s, %s'
                             % (self.min_ratio, self.max_ratio))
        if self.max_step <= 0 or self.min_change < 0:
            raise ValueError('need max_step > 0 and min_change >= 0')
        if not 0 < self.target_utilization <= 1:
            raise ValueError('need 0 < target_utilization <= 1')


@dataclasses.dataclass(frozen=True)
class Guest:
    """A VM as the ratio sees it: the flavor memory placement allocated
    for it and its measured working set (None before one was)."""

    flavor_bytes: int
    wss_bytes: int | None = None


@dataclasses.dataclass(frozen=True)
class Proposal:
    """What the ratio should be and why; ``ratio`` is None when it stays.

    ``ideal`` is u / d before the bounds, ``reasons`` the bounds that held
    it back ('min_ratio', 'max_ratio', 'max_step', 'min_change',
    'too_few_measured').
    """

    current: float
    ratio: float | None
    ideal: float | None
    demand_fraction: float | None
    measured: int
    instances: int
    reasons: tuple = ()

    def as_json(self):
        return dict(dataclasses.asdict(self), reasons=list(self.reasons))


def demand_fraction(guests, rails=guardrails.Rails()):
    """The guests' measured demand over their flavor memory (None for
    no flavor memory at all)."""
    flavor = sum(guest.flavor_bytes for guest in guests)
    if flavor <= 0:
        return None
    used = sum(demand.vm_demand(guest.flavor_bytes, guest.wss_bytes, rails)
               for guest in guests)
    return used / flavor


def propose(current, guests, bounds=Bounds(), rails=guardrails.Rails()):
    """The ratio a host whose placement ratio is ``current`` and whose
    VMs are ``guests`` (Guest) should get next."""
    guests = list(guests)
    measured = sum(1 for guest in guests if guest.wss_bytes is not None)
    fraction = demand_fraction(guests, rails)
    keep = dict(current=current, ratio=None, demand_fraction=fraction,
                measured=measured, instances=len(guests))
    if measured < bounds.min_measured_instances or fraction is None:
        return Proposal(ideal=None, reasons=('too_few_measured',), **keep)
    ideal = bounds.target_utilization / fraction
    reasons = []
    target = ideal
    if target < bounds.min_ratio:
        target, reasons = bounds.min_ratio, ['min_ratio']
    elif target > bounds.max_ratio:
        target, reasons = bounds.max_ratio, ['max_ratio']
    if abs(target - current) > bounds.max_step + _EPSILON:
        reasons.append('max_step')
        target = current + (bounds.max_step if target > current
                            else -bounds.max_step)
    target = round(target, DIGITS)
    if (target == round(current, DIGITS)
            or abs(target - current) < bounds.min_change - _EPSILON):
        reasons.append('min_change')
        return Proposal(ideal=ideal, reasons=tuple(reasons), **keep)
    return Proposal(**dict(keep, ratio=target), ideal=ideal,
                    reasons=tuple(reasons))
