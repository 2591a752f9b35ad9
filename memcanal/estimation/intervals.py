"""How far a sampled estimate may be off, and the rate that keeps it close.

A hashed sample at rate ``r`` holds each page with probability ``r``
(the lattice hash of mrc.sample_mask draws scattered pages about
independently, consecutive ones more evenly still), so the ``n``
sampled pages of a set of ``W`` pages are a binomial draw,
``n ~ Binomial(W, r)``, and ``n / r`` estimates ``W``.

- ``count_interval``: the 95 % interval of ``W`` from ``n``: the score
  (Wilson) interval of a binomial's number of trials, the ``W`` for
  which ``|n - W r| <= z sqrt(W r (1 - r))``. It is chosen over an exact
  (Clopper-Pearson-style) inversion because it holds its 95 % from a
  handful of sampled pages on (0.91 at r x W = 0.5, 0.93 to 0.97 from
  r x W = 1.7; hypothetical Binomial draws, unit-tested) without being
  as wide, has a closed form that works on arrays (every point of a
  curve at once) and needs no scipy; the hypergeometric (sampling a
  fixed number of pages without replacement) is not how a hash sample
  is drawn: its size varies. Its ``1 - r`` is the finite-population
  correction: at rate 1 the interval is the count itself. The lower
  bound is at least ``n``: those pages were seen. ``systematic``
  pages lower still: a measured term, not a sampling error
  ([sampling] systematic_pages): what a sampler counts beyond the
  guest's own loads, stores and code, the guest's page tables the MMU
  walks and devices' DMA, which a working set of those accesses
  (memtrace's, doc/estimation.md) does not hold.
- ``ratio_interval``: the band of a fault-rate curve's ratio at one
  size, a ratio of two sums over the sampled pages (misses over first
  touches), whose pages are the sample's units, not its events: the
  linearised (Taylor) variance of a ratio estimator under Bernoulli
  sampling, and never narrower than the score interval of a proportion
  of ``n / (1 - r)`` pages (a few sampled pages that agree prove
  little).
- ``needed_rate`` and ``choose_rates``: the rate whose interval is
  within a target relative error of a working set, held within
  [min_rate, max_rate] and a budget of sampled first touches per second
  per VM and per host (the agent's adaptive sampling).
"""

import math
import statistics

import numpy as np

CONFIDENCE = 0.95


def z_score(confidence=CONFIDENCE):
    """The two-sided normal quantile of ``confidence`` (1.96 at 95 %)."""
    if not 0.0 < confidence < 1.0:
        raise ValueError('confidence must be in (0, 1)')
    return statistics.NormalDist().inv_cdf(0.5 + confidence / 2)


def count_interval(count, rate, confidence=CONFIDENCE, systematic=0.0):
    """(low, high) of the pages a hashed sample at ``rate`` holding
    ``count`` of them stands for, floats (arrays for an array count);
    the low end ``systematic`` pages lower, not below 0."""
    if not 0.0 < rate <= 1.0:
        raise ValueError('the sampling rate must be in (0, 1]')
    count = np.asarray(count, float)
    z = z_score(confidence)
    spread = z * z * rate * (1.0 - rate)
    middle = 2.0 * count * rate + spread
    root = np.sqrt(spread * (4.0 * count * rate + spread))
    low = np.maximum(np.maximum((middle - root) / (2.0 * rate * rate),
                                count) - systematic, 0.0)
    high = (middle + root) / (2.0 * rate * rate)
    return low, high


def bytes_interval(count, rate, page_size, confidence=CONFIDENCE,
                   systematic=0.0):
    """[low, high] in bytes, as a report carries them, of the memory
    ``count`` sampled pages at ``rate`` stand for (count_interval's
    ``systematic``); the estimate itself, rounded as SampledAccesses
    rounds it, lies within."""
    low, high = count_interval(count, rate, confidence, systematic)
    return [int(math.floor(float(low))) * page_size,
            int(math.ceil(float(high))) * page_size]


def proportion_interval(successes, trials, confidence=CONFIDENCE):
    """Wilson's score interval of a proportion, arrays allowed; trials
    may be fractional (an effective count) but must be positive."""
    successes = np.asarray(successes, float)
    trials = np.asarray(trials, float)
    share = successes / trials
    scale = z_score(confidence) ** 2 / trials
    centre = (share + scale / 2) / (1 + scale)
    half = np.sqrt(np.maximum(
        scale * share * (1 - share) + scale * scale / 4, 0)) / (1 + scale)
    return np.clip(centre - half, 0, 1), np.clip(centre + half, 0, 1)


def ratio_interval(events, misses, rate, confidence=CONFIDENCE):
    """(ratio, low, high) of the ratio sum(misses) / sum(events) over a
    hashed sample at ``rate``.

    ``events``: per sampled page, its first touches in the window;
    ``misses``: per size (rows) and page (columns), how many of them a
    memory of that size misses. Arrays of the sizes.
    """
    events = np.asarray(events, float)
    misses = np.atleast_2d(np.asarray(misses, float))
    total = events.sum()
    if not total:
        raise ValueError('a ratio needs at least one event')
    ratio = misses.sum(axis=1) / total
    residual = misses - ratio[:, None] * events[None, :]
    half = z_score(confidence) * np.sqrt(
        (1.0 - rate) * (residual ** 2).sum(axis=1)) / total
    if rate >= 1.0:
        return ratio, ratio.copy(), ratio.copy()
    effective = np.count_nonzero(events) / (1.0 - rate)
    low, high = proportion_interval(ratio * effective, effective,
                                    confidence)
    return (ratio, np.clip(np.minimum(ratio - half, low), 0, 1),
            np.clip(np.maximum(ratio + half, high), 0, 1))


def needed_rate(pages, target_error, confidence=CONFIDENCE):
    """The lowest rate at which the interval of a working set of
    ``pages`` is within ``target_error`` of it either way (relative):
    z sqrt((1 - r) / (r W)) <= e, so r = z^2 / (e^2 W + z^2); 1 for an
    empty one (nothing sampled proves nothing)."""
    if target_error <= 0:
        raise ValueError('target_error must be positive')
    z2 = z_score(confidence) ** 2
    return z2 / (target_error ** 2 * max(float(pages), 0.0) + z2)


def ladder_rate(rate, min_rate, max_rate, down=False):
    """``rate`` moved to a rung of a ladder of factors of sqrt(2) down
    from ``max_rate`` (the next one up, or with ``down`` the next one
    down) and held within [min_rate, max_rate]: few distinct rates, so
    that a window's intervals share theirs (a window's estimates count
    at its lowest rate)."""
    if not 0.0 < min_rate <= max_rate <= 1.0:
        raise ValueError('need 0 < min_rate <= max_rate <= 1')
    if rate >= max_rate:
        return max_rate
    steps = math.log(max_rate / max(rate, 1e-12), math.sqrt(2))
    steps = math.ceil(steps - 1e-9) if down else math.floor(steps + 1e-9)
    return max(min_rate, max_rate / math.sqrt(2) ** steps)


def choose_rate(current, pages, target_error, min_rate, max_rate,
                touches_per_s=None, vm_budget=None,
                confidence=CONFIDENCE):
    """The rate of a VM's next interval.

    ``pages``: its recent working set (the agent passes the lowest
    lower bound of its last intervals: a quiet interval needs the most);
    ``touches_per_s``: its first touches per second, whole VM (None:
    unknown), of which ``vm_budget`` (None: no budget) may be sampled.
    The rate needed for ``target_error`` rounded up to the ladder, at
    most the budget's rounded down; within [min_rate, max_rate] whatever
    the budget (min_rate is the operator's floor). It rises at once, and falls
    only when the rung wanted is two below ``current`` (None: none yet),
    so that a working set at a rung's edge does not flip it every
    interval.
    """
    rate = ladder_rate(needed_rate(pages, target_error, confidence),
                       min_rate, max_rate)
    if vm_budget is not None and touches_per_s:
        rate = min(rate, ladder_rate(vm_budget / touches_per_s, min_rate,
                                     max_rate, down=True))
    if current is not None and rate < current and rate * 2 > current * (
            1 + 1e-9):
        return current
    return rate


def fit_host_budget(rates, touches_per_s, host_budget, min_rate,
                    max_rate):
    """``rates`` by VM scaled down alike to the ladder's rung at or
    below, none below ``min_rate``, so that the host's sampled first
    touches per second (rate times ``touches_per_s`` by VM, None or 0:
    unknown) stay within ``host_budget`` (None: no budget). The floor
    wins over the budget."""
    if host_budget is None:
        return dict(rates)
    load = sum(rate * (touches_per_s.get(vm) or 0.0)
               for vm, rate in rates.items())
    if load <= host_budget:
        return dict(rates)
    scale = host_budget / load
    return {vm: ladder_rate(rate * scale, min_rate, max_rate, down=True)
            for vm, rate in rates.items()}
