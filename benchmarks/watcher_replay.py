"""Grading a migration plan by replaying it: what the VMs then do.

``migration.score`` judges a plan with memcanal's own model (U-tube's
shares, the curves' miss bounds, the nova filter's check), so a planner
built on that model passes it by construction. Here the cloud is made
of workloads (memcanal.estimation.workloads), the planners get what an
agent would measure of them, and a plan is judged by running the
workloads on the hosts it leaves them on and counting their misses.

- A VM runs one workload over its footprint: a PRL loop (RWRW passes
  over an array, all or nothing under LRU), or a Hcache file server of
  one-page files picked by ``class`` (a tenth of them ten times as
  popular) or by ``zipf``. Each makes two references per page of its
  footprint a second. Pages are ``unit`` bytes (2 MiB: an 8 GB VM is
  4,096 of them), so a cloud of thousands of VMs replays in seconds.
- A VM's guest page cache is its flavor less the guest kernel; a host's
  memory is its capacity less its VMs' kernels, shared by its VMs'
  pages in one LRU: no balancer divides it, the host's reclaim does, as
  on a host that swaps. A reference hits when it hits in both: its
  stack distance among its VM's references is within the guest, and
  among all of the host's references (merged in time) within the host.
  Stack distances are memcanal.estimation.mrc's (C); under perfect LRU
  they count the very misses memcanal.estimation.guest's page cache
  does (the unit tests check it), thousands of times faster.
- Time: ``warm`` seconds, then the planning window, from which the
  planners get each VM's working set (distinct pages it referenced),
  demand (demand.vm_demand) and LRU miss-ratio curve, all measured on
  the VM alone; then the plan, then the scoring window. A host is
  simulated from the start with the VMs the plan leaves on it (a live
  migration copies a VM's memory: it arrives resident) and is scored
  over the last window only.
- Scores: a VM's miss ratio over the scoring window on its host; it is
  past its isolation bound when that exceeds ``1 + delta`` times its
  own miss ratio over the same window at its flavor size, alone (both
  at least base.MIN_MISS_RATIO), never a prediction. A host's measured
  demand is its VMs' distinct pages over the scoring window plus their
  kernels: above the threshold (90 %) of its capacity, or above all of
  it (the excess is memory its VMs use that it does not have).
"""

import dataclasses

import numpy as np

from memcanal.estimation import mrc
from memcanal.estimation import workloads
from memcanal.policy import base
from memcanal.policy import demand
from memcanal.policy import guardrails
from memcanal.policy import migration

MB = 2 ** 20
GB = 2 ** 30
SECOND_NS = 10 ** 9
UNIT = 2 * MB
WARM_SECONDS = 3.0
WINDOW_SECONDS = 3.0
NOW = 100_000.0
FLAVORS_GB = (2, 4, 8)
KINDS = ('loop', 'class', 'zipf')
KERNEL_BYTES = guardrails.Rails().kernel_bytes


def workload(kind, pages, rng, unit=UNIT):
    """A workload of ``kind`` over ``pages`` pages of ``unit`` bytes, two
    references per page a second."""
    if kind == 'loop':
        return workloads.PrlSyntheticApp(pages, 'RWRW', rng=rng)
    if kind not in KINDS:
        raise ValueError('kind must be one of %s' % ', '.join(KINDS))
    return workloads.FileServer(
        kind, files=pages, file_mb=unit // MB, write_ratio=0.1, rng=rng,
        page_size=unit, requests_per_round=256,
        reference_ns=max(1, SECOND_NS // (2 * pages)))


@dataclasses.dataclass(frozen=True)
class VM:
    """A VM's references (page numbers, evenly spaced ``reference_ns``
    apart from time 0) and the LRU stack distance of each among its
    own (mrc.FIRST_TOUCH for a first touch)."""

    name: str
    flavor_bytes: int
    kind: str
    pages: np.ndarray
    reference_ns: int
    distances: np.ndarray

    @classmethod
    def running(cls, name, flavor_bytes, kind, load, seconds):
        trace = load.run_for(seconds)
        pages = trace.pages.astype(np.int32)
        return cls(name, flavor_bytes, kind, pages, load.reference_ns,
                   mrc.stack_distances(pages).astype(np.int32))

    def within(self, window):
        """Which references fall in ``window`` (start, end) ns."""
        times = np.arange(self.pages.size, dtype=np.int64) * \
            self.reference_ns
        return (times >= window[0]) & (times < window[1])

    def guest_hits(self, unit):
        """Which references hit in its guest page cache (its flavor less
        the kernel, perfect LRU)."""
        pages = (self.flavor_bytes - KERNEL_BYTES) // unit
        return (self.distances != mrc.FIRST_TOUCH) & (self.distances <= pages)

    def working_set_bytes(self, window, unit):
        """The distinct pages it referenced in ``window``, in bytes."""
        return unit * int(np.unique(self.pages[self.within(window)]).size)

    def curve(self, window, unit, points):
        """Its LRU miss ratio over ``window`` at ``points`` sizes up to
        1.25 times its flavor, sizes in bytes (what the planners get)."""
        distances = self.distances[self.within(window)]
        sizes = np.unique(np.linspace(
            0, 1.25 * self.flavor_bytes / unit, points).astype(np.int64))
        hits = np.sort(distances[distances != mrc.FIRST_TOUCH])
        ratios = 1.0 - np.searchsorted(hits, sizes, side='right') / max(
            1, distances.size)
        return mrc.MissRatioCurve(sizes * unit, ratios, int(distances.size))


def host_misses(vms, capacity_bytes, window, unit):
    """Per VM of ``vms`` sharing a host of ``capacity_bytes``: (misses,
    references) in ``window``. The host's LRU holds its capacity less
    the VMs' kernels; a reference hits when it hits in its guest and in
    the host."""
    if not vms:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    host_pages = (capacity_bytes - KERNEL_BYTES * len(vms)) // unit
    span = 1 + max(int(vm.pages.max(initial=0)) for vm in vms)
    times = np.concatenate([np.arange(vm.pages.size, dtype=np.int64)
                            * vm.reference_ns for vm in vms])
    owner = np.concatenate([np.full(vm.pages.size, i, np.int64)
                            for i, vm in enumerate(vms)])
    keys = np.concatenate([vm.pages for vm in vms]).astype(np.int64) + \
        owner * span
    order = np.argsort(times, kind='stable')
    distances = np.empty(keys.size, np.int64)
    distances[order] = mrc.stack_distances(keys[order])
    hits = ((distances != mrc.FIRST_TOUCH) & (distances <= host_pages)
            & np.concatenate([vm.guest_hits(unit) for vm in vms]))
    counted = (times >= window[0]) & (times < window[1])
    references = np.bincount(owner[counted], minlength=len(vms))
    misses = np.bincount(owner[counted & ~hits], minlength=len(vms))
    return misses, references


@dataclasses.dataclass
class Cloud:
    """The planners' view (``hosts``, migration.Host with measured
    demand and curves), the VMs behind it and the windows; per VM, its
    miss ratio alone at its flavor and its measured demand, both over
    the scoring window. Host replays are kept by their VMs, as plans
    share most hosts."""

    hosts: list
    vms: dict
    unit: int
    planning: tuple
    scoring: tuple
    alone: dict = dataclasses.field(default_factory=dict)
    demand: dict = dataclasses.field(default_factory=dict)
    replayed: dict = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        for name, vm in self.vms.items():
            counted = vm.within(self.scoring)
            self.alone[name] = np.count_nonzero(
                ~vm.guest_hits(self.unit)[counted]) / max(
                    1, np.count_nonzero(counted))
            self.demand[name] = demand.vm_demand(
                vm.flavor_bytes, vm.working_set_bytes(self.scoring,
                                                      self.unit))

    def host_misses(self, host, names):
        """(names sorted, (misses, references) per VM) of ``host`` with
        the VMs ``names`` on it."""
        key = (host.name, tuple(sorted(names)))
        if key not in self.replayed:
            vms = [self.vms[name] for name in key[1]]
            self.replayed[key] = host_misses(
                vms, host.capacity_bytes, self.scoring, self.unit)
        return key[1], self.replayed[key]


def build(hosts, vms, hot=0.15, seed=1, unit=UNIT, warm=WARM_SECONDS,
          window=WINDOW_SECONDS, points=256,
          threshold=demand.DEFAULT_THRESHOLD, progress=None):
    """``hosts`` hosts of ``vms`` VMs (flavors of 2, 4 and 8 GB), each
    host's capacity 3/4 of its VMs' flavors; on the ``hot`` share of
    hosts footprints are 60-100 % of the guest's memory (its flavor less
    the kernel), elsewhere 15-60 %. Hosts whose measured demand is above
    the threshold have been for an hour."""
    rng = np.random.default_rng(seed)
    hot_hosts = set(rng.choice(hosts, max(1, int(round(hot * hosts))),
                               replace=False).tolist())
    planning = (int(warm * SECOND_NS), int((warm + window) * SECOND_NS))
    scoring = (planning[1], planning[1] + int(window * SECOND_NS))
    seconds = scoring[1] / SECOND_NS
    built, running = [], {}
    for h in range(hosts):
        if progress and h % 10 == 0:
            progress('  workloads of host %d of %d' % (h, hosts))
        low, high = (0.6, 1.0) if h in hot_hosts else (0.15, 0.6)
        instances = []
        for v in range(vms):
            name = 'h%04d-vm%02d' % (h, v)
            flavor = int(rng.choice(FLAVORS_GB)) * GB
            pages = max(1, int((flavor - KERNEL_BYTES)
                               * rng.uniform(low, high)) // unit)
            kind = KINDS[int(rng.integers(len(KINDS)))]
            vm = VM.running(name, flavor, kind, workload(
                kind, pages, np.random.default_rng([seed, h, v]), unit),
                seconds)
            running[name] = vm
            instances.append(migration.Instance(
                name, flavor, demand.vm_demand(
                    flavor, vm.working_set_bytes(planning, unit)),
                flavor, vm.curve(planning, unit, points)))
        capacity = int(0.75 * sum(vm.flavor_bytes for vm in instances))
        load = sum(vm.demand_bytes for vm in instances) / capacity
        built.append(migration.Host(
            'h%04d' % h, capacity, tuple(instances), 'nova',
            NOW - 3600 if load > threshold else None))
    return Cloud(built, running, unit, planning, scoring)


def move_fields(move):
    """(vm, source, destination) of a migration.Move or a tuple."""
    if isinstance(move, migration.Move):
        return move.vm, move.source, move.destination
    return tuple(move)


def placed(hosts, moves):
    """Host name -> the names of its VMs after ``moves`` ((vm, source,
    destination) or migration.Move, in order)."""
    where = {host.name: [vm.name for vm in host.instances] for host in hosts}
    for move in moves:
        vm, source, destination = move_fields(move)
        if vm not in where[source]:
            raise ValueError('%s is not on %s' % (vm, source))
        where[source].remove(vm)
        where[destination].append(vm)
    return where


def placement(hosts, moves, memory_ratio):
    """(admitted, refused): ``moves`` split, in order, by whether the
    destination's flavors then fit its capacity times ``memory_ratio``,
    as placement holding that allocation ratio checks a live
    migration's claim. A refused move does not happen."""
    flavors = {vm.name: vm.flavor_bytes for h in hosts for vm in h.instances}
    allocated = {h.name: sum(vm.flavor_bytes for vm in h.instances)
                 for h in hosts}
    limit = {h.name: h.capacity_bytes * memory_ratio for h in hosts}
    admitted, refused = [], []
    for move in moves:
        vm, source, destination = move_fields(move)
        if allocated[destination] + flavors[vm] > limit[destination]:
            refused.append(move)
            continue
        admitted.append(move)
        allocated[source] -= flavors[vm]
        allocated[destination] += flavors[vm]
    return admitted, refused


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What the VMs did in the scoring window after a plan: misses over
    references of all VMs, the VMs past their isolation bound, hosts
    whose measured demand is above the threshold and above their
    capacity, and by how much in all (bytes)."""

    miss_ratio: float
    past_bound: tuple
    hosts_over_threshold: tuple
    hosts_short: tuple
    short_bytes: int


def replay(cloud, moves, delta=migration.DEFAULT_DELTA,
           threshold=demand.DEFAULT_THRESHOLD):
    """Run ``cloud``'s VMs on the hosts ``moves`` leave them on; an
    Outcome."""
    where = placed(cloud.hosts, moves)
    floor = base.MIN_MISS_RATIO
    misses = references = 0
    past, over, short, short_bytes = [], [], [], 0
    for host in cloud.hosts:
        names, (vm_misses, vm_references) = cloud.host_misses(
            host, where[host.name])
        misses += int(vm_misses.sum())
        references += int(vm_references.sum())
        ratios = vm_misses / np.maximum(vm_references, 1)
        past += [name for name, ratio in zip(names, ratios)
                 if max(ratio, floor) > (1 + delta) * max(
                     cloud.alone[name], floor)]
        used = sum(cloud.demand[name] for name in names)
        if used > threshold * host.capacity_bytes:
            over.append(host.name)
        if used > host.capacity_bytes:
            short.append(host.name)
            short_bytes += used - host.capacity_bytes
    return Outcome(misses / max(1, references), tuple(sorted(past)),
                   tuple(over), tuple(short), short_bytes)
