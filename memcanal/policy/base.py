"""What every policy shares: the VM it decides for and its answer."""

import dataclasses
import math

import numpy as np

from memcanal.estimation import mrc

MB = 2 ** 20
PAGE_BYTES = 4096
DEFAULT_UNIT_BYTES = 4 * MB
"""Lu and Shen allocate memory in multiples of 4 MB."""
MIN_MISS_RATIO = 1e-3
"""Floor of a miss ratio a relative one is taken against. A VM with almost
no misses at its baseline would otherwise make any change look infinitely
costly (the caption of Hcache's Fig. 11 sets "a small baseline" too)."""
FAULT_RATE_CURVES = ('sampled',)
"""Curves whose ratios are the fraction of a VM's first-touch events that
fault at each size (memcanal.estimation.sampling), not misses per access:
at its whole memory such a VM faults almost never, so misses relative to
its flavor size say nothing; its faults per minute are bounded instead."""
DEFAULT_FAULT_RATE_BOUND = 0.002
"""Faults per minute allowed, as a fraction of the working set: Google's
far memory held promotions at 0.2 % of a job's working set per minute
(Lagar-Cavilla et al., ASPLOS'19)."""


def curve_from_points(points):
    """A MissRatioCurve (sizes in bytes) from ``[[bytes, ratio], ...]``,
    as reports store them; a repeated size keeps its first ratio."""
    try:
        pairs = sorted(((int(size), float(ratio)) for size, ratio in points),
                       key=lambda pair: pair[0])
    except (TypeError, ValueError, OverflowError):
        raise ValueError('a curve is a list of [bytes, miss ratio] pairs')
    if not pairs:
        raise ValueError('a curve needs at least one point')
    if not all(size >= 0 and math.isfinite(ratio) for size, ratio in pairs):
        raise ValueError('a curve has sizes from 0 and finite ratios')
    sizes, first = np.unique([size for size, _ in pairs], return_index=True)
    ratios = np.clip(np.array([ratio for _, ratio in pairs])[first], 0, 1)
    return mrc.MissRatioCurve(sizes, ratios, references=0)


@dataclasses.dataclass(frozen=True)
class FaultBound:
    """How a fault-rate curve's ratios read as faults, and the bound on
    them: ``touches_per_s`` first-touch events per second (a ratio times
    it is faults per second), ``wss_bytes`` the working set, ``bound``
    the faults allowed per minute as a fraction of it."""

    touches_per_s: float
    wss_bytes: int
    bound: float

    def per_minute(self, ratios):
        """The fraction of the working set faulted per minute at the
        curve's ``ratios``."""
        return (np.asarray(ratios, float) * self.touches_per_s * 60
                * PAGE_BYTES / self.wss_bytes)

    @property
    def allowed_ratio(self):
        """The curve's ratio at which the faults meet the bound; 1 when
        none could exceed it (a VM touching nothing)."""
        if self.touches_per_s <= 0:
            return 1.0
        return min(1.0, self.bound * self.wss_bytes / PAGE_BYTES / 60
                   / self.touches_per_s)


def fault_bound(method, wss_bytes, guest_stats, bound):
    """The FaultBound of a VM whose curve came from ``method``, its
    working set and its report's ``guest_stats``; None for a curve of
    misses per access, or when the working set or the touch rate that
    turn the ratios into faults is missing (the curve is then read as
    any other)."""
    if method not in FAULT_RATE_CURVES:
        return None
    if bound <= 0:
        raise ValueError('the fault rate bound must be positive')
    touches = (guest_stats or {}).get('sampled_touches_per_s')
    if touches is None or touches < 0 or not wss_bytes:
        return None
    return FaultBound(float(touches), int(wss_bytes), float(bound))


def fault_curve(curve, flavor_bytes):
    """A fault-rate curve as the policies read it for a VM of
    ``flavor_bytes``: with all its memory a VM takes no fault (its pager
    holds none of its pages), so the ratio is 0 from there on. Below, it
    is the curve's, and past the curve's last point (the working set of
    the longest reuse the sampler tells apart) its last ratio: longer
    reuses and first touches fault there. A VM whose faults exceed the
    bound at every measured size therefore keeps its flavor memory,
    rather than its bound being taken relative to that extrapolation."""
    below = curve.sizes < flavor_bytes
    return mrc.MissRatioCurve(np.append(curve.sizes[below], flavor_bytes),
                              np.append(curve.miss_ratios[below], 0.0),
                              curve.references)


def miss_floor(faults, delta):
    """The VM.miss_floor of a VM with ``faults`` (a FaultBound or None)
    under isolation bound ``delta``.

    For a fault-rate curve (read through fault_curve: no faults at the
    flavor size) it is the ratio allowed by the bound over ``1 + delta``:
    a relative miss ratio of ``1 + delta`` is then exactly where the
    VM's faults meet the bound, so every policy's isolation bound holds
    its faults there; sizes faulting at most ``bound / (1 + delta)`` cost
    nothing in the geometric mean.
    """
    if faults is None:
        return MIN_MISS_RATIO
    return faults.allowed_ratio / (1 + delta)


@dataclasses.dataclass(frozen=True)
class VM:
    """A VM as the policies see it.

    ``baseline_bytes`` is what the isolation bound and the relative miss
    ratios are taken against (the VM's flavor memory in the service);
    ``memory_bytes`` what it has now (default: the baseline), where it
    stays when moving it gains nothing; ``min_bytes`` and ``max_bytes``
    bound every allocation. Its miss ratios count from ``miss_floor``
    up (``miss_floor(faults, delta)`` for a fault-rate curve, whose
    ``faults`` ESX reads too). ``band``, for a sampled curve, is its
    95 % band, (low, high) curves read as the curve is: no shrink is
    made where it is wider than the move's benefit (policy.benefit).
    """

    name: str
    baseline_bytes: int
    curve: mrc.MissRatioCurve | None
    min_bytes: int = 0
    max_bytes: int | None = None
    shares: float = 1.0
    memory_bytes: int | None = None
    miss_floor: float = MIN_MISS_RATIO
    faults: FaultBound | None = None
    band: tuple | None = None

    @property
    def current_bytes(self):
        return (self.baseline_bytes if self.memory_bytes is None
                else self.memory_bytes)

    def miss_ratio(self, sizes):
        """The curve's miss ratio at ``sizes`` bytes (1.0 without one)."""
        if self.curve is None:
            return np.ones_like(np.asarray(sizes, float))
        return self.curve.at(sizes)

    def relative_miss_ratio(self, sizes):
        """Misses at ``sizes`` over misses at the baseline (Lu and Shen's
        per-VM miss ratio), both at least ``miss_floor``; 1.0 without a
        curve."""
        floor = self.miss_floor
        baseline = max(float(self.miss_ratio(self.baseline_bytes)), floor)
        return np.maximum(self.miss_ratio(sizes), floor) / baseline

    def upper_bytes(self, total_bytes):
        return total_bytes if self.max_bytes is None else min(
            self.max_bytes, total_bytes)


def geometric_mean(values):
    values = list(values)
    if not values:
        return 1.0
    return math.exp(sum(math.log(v) for v in values) / len(values))


@dataclasses.dataclass(frozen=True)
class Allocation:
    """A policy's answer: a target per VM, the relative miss ratio it
    predicts there, their geometric mean, and how it got there."""

    policy: str
    targets: dict
    predicted: dict
    geometric_mean: float
    details: dict = dataclasses.field(default_factory=dict)

    @classmethod
    def of(cls, policy, vms, targets, **details):
        predicted = {vm.name: float(vm.relative_miss_ratio(targets[vm.name]))
                     for vm in vms}
        return cls(policy, {name: int(size) for name, size in
                            targets.items()},
                   predicted, geometric_mean(predicted.values()), details)

    def as_json(self):
        return dataclasses.asdict(self)
