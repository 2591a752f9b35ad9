"""What every policy shares: the VM it decides for and its answer."""

import dataclasses
import math

import numpy as np

from memcanal.estimation import mrc

MB = 2 ** 20
DEFAULT_UNIT_BYTES = 4 * MB
"""Lu and Shen allocate memory in multiples of 4 MB."""
MIN_MISS_RATIO = 1e-3
"""Floor of a miss ratio a relative one is taken against. A VM with almost
no misses at its baseline would otherwise make any change look infinitely
costly (the caption of Hcache's Fig. 11 sets "a small baseline" too)."""


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
class VM:
    """A VM as the policies see it.

    ``baseline_bytes`` is what the isolation bound and the relative miss
    ratios are taken against (the VM's flavor memory in the service);
    ``memory_bytes`` what it has now (default: the baseline), where it
    stays when moving it gains nothing; ``min_bytes`` and ``max_bytes``
    bound every allocation.
    """

    name: str
    baseline_bytes: int
    curve: mrc.MissRatioCurve | None
    min_bytes: int = 0
    max_bytes: int | None = None
    shares: float = 1.0
    memory_bytes: int | None = None

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
        per-VM miss ratio); 1.0 without a curve."""
        baseline = max(float(self.miss_ratio(self.baseline_bytes)),
                       MIN_MISS_RATIO)
        return np.maximum(self.miss_ratio(sizes), MIN_MISS_RATIO) / baseline

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
