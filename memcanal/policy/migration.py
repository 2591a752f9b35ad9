"""Which VMs to live-migrate off hosts whose measured demand stays high.

U-tube (Liu et al., section 3.1) moves VMs off a host when its memory
utilization exceeds 90 %; here a host's utilization is its VMs' measured
demand over its capacity (memcanal.policy.demand), and it must stay
above ``threshold`` for ``hold_seconds`` first, so a short burst moves
nothing.

What a move does is predicted from the VMs' miss-ratio curves, under the
memory a host's balancer gives each VM: U-tube's eq. 5 with the host's
capacity as the memory shared, ``min(flavor, demand * capacity /
host demand)``. Taking a VM off a hot host gives the others more;
landing it on a destination gives the residents less. A move is planned
only when:

- ``demand.accepts`` takes it at the destination, the very check the
  nova filter makes, so no plan moves a VM where the scheduler would
  refuse it;
- neither the VM nor any destination resident within its miss bound
  falls below it: the bound of a VM is the least memory at which its
  relative miss ratio (misses over misses at its flavor size, both from
  its ``miss_floor`` up) stays within ``1 + delta`` (Lu and Shen's
  isolation bound; for a fault-rate curve, where its faults meet their
  bound: base.miss_floor);
- the destination is in the VM's availability zone (a live migration
  keeps it) and no hard (anti-)affinity of its server groups breaks;
- it relieves at least ``min_gain_bytes`` of the source's demand above
  the threshold, and at least ``min_gain_fraction`` of the memory the
  migration copies (a big copy for a sliver of relief is not worth it).

Among those, a VM whose move alone brings the source under the
threshold is preferred, then the one leaving the fewest source VMs past
their bounds, then the cheapest to copy; failing one, the largest relief.
Its destination is the one where it gets the most memory (lowest
utilization after), soft (anti-)affinity first. Hot hosts are taken most
loaded first, and at most ``max_concurrent`` moves are planned in all.

Destinations are checked for a host's candidate VMs at once, in arrays
over all hosts; miss bounds are found only for the VMs of the hosts
looked at (from one sorted table of their curves) and kept until a move
changes that host, so a thousand hosts of thirty VMs plan in a fraction
of a second (benchmarks/watcher_compare.py --scale). Curve sizes are in
bytes (``base.curve_from_points``).
"""

import dataclasses

import numpy as np

from memcanal.policy import base
from memcanal.policy import demand

GB = 2 ** 30
DEFAULT_HOLD_SECONDS = 600.0
DEFAULT_MIN_GAIN_BYTES = 256 * base.MB
DEFAULT_MIN_GAIN_FRACTION = 0.0
DEFAULT_MAX_CONCURRENT = 4
DEFAULT_DELTA = 0.05

HARD_POLICIES = ('anti-affinity', 'affinity')
SOFT_POLICIES = ('soft-anti-affinity', 'soft-affinity')


@dataclasses.dataclass(frozen=True)
class Instance:
    """A VM as the planner sees it. ``demand_bytes`` is its measured
    demand (``demand.vm_demand``), ``memory_bytes`` what it has now (what
    a live migration copies), ``flavor_bytes`` what its misses are taken
    against."""

    name: str
    memory_bytes: int
    demand_bytes: int
    flavor_bytes: int
    curve: object = None
    server_groups: tuple = ()
    # False: the VM stays where it is (memory pooling pages it; its pages
    # are on its host's pager and a lender's server).
    movable: bool = True
    # Its miss ratios count from here up (base.VM.miss_floor).
    miss_floor: float = base.MIN_MISS_RATIO


@dataclasses.dataclass(frozen=True)
class Host:
    """A compute host: ``capacity_bytes`` is its memory less what is
    reserved; ``over_threshold_since`` when its utilization last went
    above the threshold (seconds, on the clock ``plan`` is given), None
    if it is not above it."""

    name: str
    capacity_bytes: int
    instances: tuple = ()
    availability_zone: str | None = None
    over_threshold_since: float | None = None
    # Placement's MEMORY_MB allocation ratio: as placement checks a live
    # migration's claim, a destination takes a VM only while its VMs'
    # flavors fit capacity_bytes times it. None: not checked.
    allocation_ratio: float | None = None

    @property
    def demand_bytes(self):
        return sum(vm.demand_bytes for vm in self.instances)

    def load(self):
        return demand.HostLoad(self.name, self.capacity_bytes,
                               self.demand_bytes)


@dataclasses.dataclass(frozen=True)
class Options:
    threshold: float = demand.DEFAULT_THRESHOLD
    hold_seconds: float = DEFAULT_HOLD_SECONDS
    min_gain_bytes: int = DEFAULT_MIN_GAIN_BYTES
    min_gain_fraction: float = DEFAULT_MIN_GAIN_FRACTION
    max_concurrent: int = DEFAULT_MAX_CONCURRENT
    """Migrations allowed now: the caller subtracts those in flight."""
    margin: float = demand.DEFAULT_MARGIN
    delta: float = DEFAULT_DELTA
    same_zone: bool = True
    busy_hosts: frozenset = frozenset()
    """Hosts taking part in a migration now: neither source nor
    destination of another."""
    one_per_host: bool = False
    """A host takes part in at most one of the planned moves."""


@dataclasses.dataclass(frozen=True)
class Move:
    """One live migration and what it is predicted to do: both hosts'
    utilization after it, the memory the VM gets at the destination and
    its relative miss ratio there, and the source's demand above the
    threshold it relieves."""

    vm: str
    source: str
    destination: str
    demand_bytes: int
    memory_bytes: int
    gain_bytes: int
    source_utilization: float
    destination_utilization: float
    destination_memory_bytes: int
    relative_miss_ratio: float


@dataclasses.dataclass(frozen=True)
class Plan:
    """The moves, in order, and for every hot host still above the
    threshold after them, why (``held[host]['reason']``): ``hold`` (not
    above it long enough), ``cap`` (no migrations left), ``busy`` (in a
    migration already, or in a planned one with ``one_per_host``),
    ``no_destination``
    (no host in reach takes any of its VMs: the filter's check, zone,
    server groups, placement's allocation ratio), ``miss_bound`` (only hosts
    where a VM would fall below its miss bound would), ``min_gain`` (no
    move relieves enough)."""

    moves: tuple
    held: dict
    details: dict = dataclasses.field(default_factory=dict)

    def as_json(self):
        return dataclasses.asdict(self)


class _Curves:
    """Every VM's curve in one sorted table: row ``r``'s sizes shifted
    by ``r * span``, so one ``searchsorted`` looks up any VMs at any
    sizes. Rows without a curve miss always (relative ratio 1). Each
    row's ratios count from its floor up (base.VM.miss_floor)."""

    def __init__(self, curves, floors):
        lengths = np.array([0 if c is None else len(c.sizes)
                            for c in curves], np.int64)
        present = [c for c in curves if c is not None]
        sizes = (np.concatenate([np.asarray(c.sizes, np.int64)
                                 for c in present])
                 if present else np.zeros(0, np.int64))
        self.ratios = (np.concatenate([np.asarray(c.miss_ratios, float)
                                       for c in present])
                       if present else np.zeros(0))
        largest = int(sizes.max()) + 1 if sizes.size else 1
        self.span = 1 << max(largest - 1, 1).bit_length()
        if len(curves) * self.span >= 2 ** 62:
            raise ValueError('curve sizes too large to index together')
        self.starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(
            np.int64)
        self.padded = np.concatenate([[1.0], self.ratios])
        self.lengths = lengths
        self.rows = np.repeat(np.arange(len(curves), dtype=np.int64),
                              lengths)
        self.sizes = sizes
        self.keys = self.rows * self.span + sizes
        self.floors = np.asarray(floors, float)

    def at(self, rows, sizes):
        """Miss ratio of VMs ``rows`` at ``sizes`` bytes (broadcast), the
        step function ``MissRatioCurve.at`` is."""
        rows = np.asarray(rows, np.int64)
        queries = np.clip(np.asarray(sizes, float), 0, self.span - 1)
        keys = rows * self.span + queries.astype(np.int64)
        position = np.searchsorted(self.keys, keys, side='right') - \
            self.starts[rows]
        return np.where(position > 0,
                        self.padded[self.starts[rows] + position], 1.0)

    def bounds(self, flavors, delta):
        """Per VM, the least memory from which up to its flavor its
        relative miss ratio stays within ``1 + delta``; 0 without a
        curve."""
        base_ratio = np.maximum(
            self.at(np.arange(len(flavors)), flavors), self.floors)
        limit = (1 + delta) * base_ratio
        rows = self.rows
        violates = ((self.sizes <= flavors[rows])
                    & (np.maximum(self.ratios, self.floors[rows])
                       > limit[rows]))
        # Below its first point a curve misses always.
        has = self.lengths > 0
        first = np.zeros(len(flavors), np.int64)
        first[has] = self.sizes[self.starts[has]]
        bound = np.where(has & (limit < 1.0), first, 0)
        index = np.flatnonzero(violates)
        if index.size:
            owner = rows[index]
            last = np.r_[owner[1:] != owner[:-1], True]
            ends = self.starts + self.lengths - 1
            nxt = np.minimum(index[last] + 1, ends[owner[last]])
            bound[owner[last]] = self.sizes[nxt]
        return bound


class _Cluster:
    """The hosts and VMs as arrays (hosts sorted by name, so ties go
    the same way every time), updated as moves are planned."""

    def __init__(self, hosts, groups, options):
        self.options = options
        self.hosts = sorted(hosts, key=lambda host: host.name)
        self.host_index = {h.name: i for i, h in enumerate(self.hosts)}
        vms = [(i, vm) for i, h in enumerate(self.hosts)
               for vm in h.instances]
        self.vms = [vm for _, vm in vms]
        self.vm_index = {vm.name: k for k, vm in enumerate(self.vms)}
        self.capacity = np.array([h.capacity_bytes for h in self.hosts],
                                 np.int64)
        zones = {}
        self.zone = np.array([zones.setdefault(h.availability_zone,
                                               len(zones))
                              for h in self.hosts], np.int64)
        self.host_of = np.array([i for i, _ in vms], np.int64)
        self.demand = np.array([vm.demand_bytes for vm in self.vms],
                               np.int64)
        self.memory = np.array([vm.memory_bytes for vm in self.vms],
                               np.int64)
        self.flavor = np.array([vm.flavor_bytes for vm in self.vms],
                               np.int64)
        self.movable = np.array([vm.movable for vm in self.vms], bool)
        # What placement still admits on each host, by flavor.
        self.placement_room = np.array(
            [np.inf if h.allocation_ratio is None
             else h.capacity_bytes * h.allocation_ratio for h in self.hosts],
            float)
        np.subtract.at(self.placement_room, self.host_of, self.flavor)
        # Bounds are found when first needed: most hosts are never a
        # source nor a close enough destination to be looked at.
        self.bound = np.full(len(self.vms), -1, np.int64)
        self.host_demand = np.zeros(len(self.hosts), np.int64)
        np.add.at(self.host_demand, self.host_of, self.demand)
        self.residents = [[] for _ in self.hosts]
        for k, i in enumerate(self.host_of):
            self.residents[i].append(k)
        self.policies = dict(groups or {})
        self.members = {}
        for k, vm in enumerate(self.vms):
            for group in vm.server_groups:
                if self.policies.get(group) in HARD_POLICIES + SOFT_POLICIES:
                    self.members.setdefault(group, []).append(k)
        self.push_limit = np.full(len(self.hosts), np.nan)
        self.busy = np.array([h.name in options.busy_hosts
                              for h in self.hosts], bool)

    def shares(self, vms, capacity, host_demand):
        """U-tube's eq. 5 with the host's capacity shared."""
        with np.errstate(divide='ignore', invalid='ignore'):
            share = self.demand[vms] * (np.asarray(capacity, float)
                                        / host_demand)
        share = np.where(host_demand > 0, share, self.flavor[vms])
        return np.minimum(self.flavor[vms], np.maximum(share, 0))

    def bounds(self, vms):
        """The miss bounds of VMs ``vms`` (found once, then kept)."""
        unknown = vms[self.bound[vms] < 0]
        if unknown.size:
            curves = _Curves([self.vms[k].curve for k in unknown],
                             [self.vms[k].miss_floor for k in unknown])
            self.bound[unknown] = curves.bounds(self.flavor[unknown],
                                                self.options.delta)
        return self.bound[vms]

    def relative_miss_ratio(self, k, size):
        """VM ``k``'s misses at ``size`` over its misses at its flavor."""
        vm = self.vms[k]
        return float(base.VM(vm.name, vm.flavor_bytes, vm.curve,
                             miss_floor=vm.miss_floor)
                     .relative_miss_ratio(size))

    def _limits(self, vms):
        """Per VM, the demand its host may reach before the VM falls
        below its miss bound (capacity * demand / bound); inf for VMs
        without a bound or already below it."""
        host = self.host_of[vms]
        share = self.shares(vms, self.capacity[host], self.host_demand[host])
        bound = self.bounds(vms)
        within = (bound > 0) & (share >= bound)
        with np.errstate(divide='ignore', invalid='ignore'):
            limit = self.capacity[host] * (self.demand[vms] / bound)
        return np.where(within, limit, np.inf)

    def limits(self, hosts):
        """The demand each of ``hosts`` may reach before a resident now
        within its miss bound falls below it (found once per change)."""
        unknown = hosts[np.isnan(self.push_limit[hosts])]
        if unknown.size:
            self.push_limit[unknown] = np.inf
            vms = np.array([k for i in unknown for k in self.residents[i]],
                           np.int64)
            if vms.size:
                np.minimum.at(self.push_limit, self.host_of[vms],
                              self._limits(vms))
        return self.push_limit[hosts]

    def utilization(self, i, change=0):
        if self.capacity[i] <= 0:
            return float('inf')
        return float((self.host_demand[i] + change) / self.capacity[i])

    def move(self, k, destination):
        source = self.host_of[k]
        self.residents[source].remove(k)
        self.residents[destination].append(k)
        self.host_of[k] = destination
        self.host_demand[source] -= self.demand[k]
        self.host_demand[destination] += self.demand[k]
        self.placement_room[source] += self.flavor[k]
        self.placement_room[destination] -= self.flavor[k]
        self.push_limit[[source, destination]] = np.nan

    def group_masks(self, k):
        """(allowed destinations or None, soft penalties or None) for VM
        ``k`` from its server groups, where its fellow members are now."""
        allowed = None
        penalty = None
        source = self.host_of[k]
        for group in self.vms[k].server_groups:
            policy = self.policies.get(group)
            others = [m for m in self.members.get(group, ()) if m != k]
            if policy is None or not others:
                continue
            with_others = np.zeros(len(self.hosts), bool)
            with_others[self.host_of[others]] = True
            if policy == 'anti-affinity':
                mask = ~with_others
            elif policy == 'affinity':
                # Moving one member alone breaks the group unless the
                # others all sit on one other host.
                mask = with_others if (with_others.sum() == 1
                                       and not with_others[source]) \
                    else np.zeros(len(self.hosts), bool)
            else:
                miss = (with_others if policy == 'soft-anti-affinity'
                        else ~with_others)
                penalty = miss.astype(np.int64) if penalty is None \
                    else penalty + miss
                continue
            allowed = mask if allowed is None else allowed & mask
        return allowed, penalty


def _destinations(cluster, source, vms):
    """For each of ``vms`` on ``source``: the best destination index (or
    -1), and whether any host took it before the miss bounds were
    checked.

    All hosts are checked at once for what is cheap (the filter's check,
    zone, groups, the VM's own bound); the residents' bounds only for
    the best-ranked hosts, in rank order, until one keeps them.
    """
    options = cluster.options
    capacity = cluster.capacity[None, :]
    need = cluster.demand[vms][:, None]
    after = cluster.host_demand[None, :] + need
    # demand.accepts, elementwise, in the same arithmetic.
    headroom = np.trunc(cluster.capacity
                        - cluster.host_demand * (1 + options.margin))
    with np.errstate(divide='ignore', invalid='ignore'):
        utilization = np.where(capacity > 0, after / capacity, np.inf)
    ok = ((capacity > 0) & (headroom[None, :] >= need)
          & (utilization <= options.threshold))
    ok[:, source] = False
    ok[:, cluster.busy] = False
    ok &= cluster.placement_room[None, :] >= cluster.flavor[vms][:, None]
    if options.same_zone:
        ok &= (cluster.zone == cluster.zone[source])[None, :]
    penalty = np.zeros(ok.shape, np.int64)
    for row, k in enumerate(vms):
        allowed, soft = cluster.group_masks(k)
        if allowed is not None:
            ok[row] &= allowed
        if soft is not None:
            penalty[row] = soft
    reachable = ok.any(axis=1)
    # The VM keeps its bound where demand * capacity / after >= bound.
    ok &= after * (cluster.bounds(vms)[:, None] / need) <= capacity
    rank = np.where(ok, penalty * 10.0 + utilization, np.inf)
    # Then the residents' bounds, known ones first; for the rest, those
    # of the best few hosts of every VM still looking (twice as many
    # each round), until every VM's best host keeps them.
    rank[after > cluster.push_limit[None, :]] = np.inf
    rows = np.arange(len(vms))
    top = 2
    while True:
        best = np.argmin(rank, axis=1)
        found = np.isfinite(rank[rows, best])
        look = rows[found & np.isnan(cluster.push_limit[best])]
        if not look.size:
            break
        top = min(2 * top, rank.shape[1])
        near = np.argpartition(rank[look], top - 1, axis=1)[:, :top]
        near = np.unique(near[np.isfinite(rank[look[:, None], near])])
        pushes = after[:, near] > cluster.limits(near)[None, :]
        rank[:, near] = np.where(pushes, np.inf, rank[:, near])
    best = np.where(found, best, -1)
    return best, reachable


def _choose(cluster, source, excess):
    """The next move off ``source``: ((vm, destination, gain), None) or
    (None, why there is none)."""
    options = cluster.options
    vms = np.array(cluster.residents[source], np.int64)
    gain = np.minimum(cluster.demand[vms], excess)
    # Relieving all of a small excess is always enough.
    enough = ((gain >= min(options.min_gain_bytes, excess))
              & (gain >= options.min_gain_fraction * cluster.memory[vms])
              & cluster.movable[vms])
    vms, gain = vms[enough], gain[enough]
    if not vms.size:
        return None, 'min_gain'
    best, reachable = _destinations(cluster, source, vms)
    candidates = np.flatnonzero(best >= 0)
    if not candidates.size:
        return None, 'miss_bound' if reachable.any() else 'no_destination'
    # The source's VMs after each candidate leaves (candidate x VM).
    everyone = np.array(cluster.residents[source], np.int64)
    capacity = cluster.capacity[source]
    remaining = cluster.host_demand[source] - cluster.demand[vms[candidates]]
    share = cluster.shares(everyone[None, :], capacity, remaining[:, None])
    past = share < cluster.bounds(everyone)[None, :]
    past &= everyone[None, :] != vms[candidates][:, None]
    keys = []
    for row, c in enumerate(candidates):
        k = vms[c]
        covers = remaining[row] <= options.threshold * capacity
        left_past = int(past[row].sum())
        order = ((left_past, int(cluster.memory[k])) if covers
                 else (-int(gain[c]), left_past, int(cluster.memory[k])))
        keys.append((not covers,) + order + (cluster.vms[k].name,))
    c = candidates[min(range(len(keys)), key=keys.__getitem__)]
    return (int(vms[c]), int(best[c]), int(gain[c])), None


def _hot(cluster, now):
    """Hot host indexes, most loaded first, and the held ones' reasons."""
    options = cluster.options
    hot, held = [], {}
    for i, host in enumerate(cluster.hosts):
        utilization = cluster.utilization(i)
        if utilization <= options.threshold:
            continue
        since = host.over_threshold_since
        if since is None or now - since < options.hold_seconds:
            held[host.name] = {'reason': 'hold', 'utilization': utilization,
                               'over_threshold_since': since}
        else:
            hot.append(i)
    hot.sort(key=lambda i: (-cluster.utilization(i),
                            cluster.hosts[i].over_threshold_since,
                            cluster.hosts[i].name))
    return hot, held


def plan(hosts, now, groups=None, options=None):
    """Moves off the hosts above ``options.threshold`` since at least
    ``options.hold_seconds`` before ``now``.

    ``hosts``: Host objects; ``groups``: server group id -> policy
    ('anti-affinity', 'affinity', 'soft-anti-affinity', 'soft-affinity');
    VMs name the groups they belong to. Returns a Plan.
    """
    options = options or Options()
    cluster = _Cluster(hosts, groups, options)
    hot, held = _hot(cluster, now)
    moves = []
    for source in hot:
        name = cluster.hosts[source].name
        before = cluster.utilization(source)
        reason = None
        while cluster.utilization(source) > options.threshold:
            if cluster.busy[source]:
                reason = 'busy'
                break
            if len(moves) >= options.max_concurrent:
                reason = 'cap'
                break
            excess = (cluster.host_demand[source]
                      - options.threshold * cluster.capacity[source])
            chosen, reason = _choose(cluster, source, excess)
            if chosen is None:
                break
            k, destination, gain = chosen
            target = cluster.hosts[destination]
            load = demand.HostLoad(target.name,
                                   int(cluster.capacity[destination]),
                                   int(cluster.host_demand[destination]))
            if not demand.accepts(load, int(cluster.demand[k]),
                                  options.margin, options.threshold):
                raise AssertionError('planned a move the filter refuses')
            cluster.move(k, destination)
            if options.one_per_host:
                cluster.busy[[source, destination]] = True
            share = int(cluster.shares(np.array([k]),
                                       cluster.capacity[destination],
                                       cluster.host_demand[destination])[0])
            moves.append(Move(
                vm=cluster.vms[k].name, source=name,
                destination=target.name,
                demand_bytes=int(cluster.demand[k]),
                memory_bytes=int(cluster.memory[k]), gain_bytes=gain,
                source_utilization=cluster.utilization(source),
                destination_utilization=cluster.utilization(destination),
                destination_memory_bytes=share,
                relative_miss_ratio=cluster.relative_miss_ratio(k, share)))
        if cluster.utilization(source) > options.threshold:
            held[name] = {'reason': reason, 'utilization': before,
                          'utilization_after': cluster.utilization(source),
                          'moves': sum(m.source == name for m in moves)}
    return Plan(tuple(moves), held, {
        'threshold': options.threshold, 'hot': [
            cluster.hosts[i].name for i in hot],
        'migrations': len(moves)})


@dataclasses.dataclass(frozen=True)
class Score:
    """What a plan did to a cluster: demand taken off the hosts above
    the threshold before it, the hosts above it after, VMs newly below
    their miss bound (moved VMs and destination residents), the moves
    the nova filter would have refused, and the migrations used."""

    freed_bytes: int
    hot_before: tuple
    hot_after: tuple
    pushed_past_bound: tuple
    refused: tuple
    migrations: int


def _move_fields(move):
    if isinstance(move, Move):
        return move.vm, move.source, move.destination
    return tuple(move)


def score(hosts, moves, options=None, groups=None):
    """Apply ``moves`` (Move objects or (vm, source, destination)
    tuples), in order, to the cluster ``hosts`` and score the result
    under ``options`` (threshold, margin, delta)."""
    options = options or Options()
    cluster = _Cluster(hosts, groups, options)
    moves = [_move_fields(move) for move in moves]
    # Only the VMs on hosts a move leaves or reaches change memory.
    touched = {cluster.host_index[name] for _, source, destination in moves
               for name in (source, destination)}
    vms = np.array([k for i in sorted(touched) for k in cluster.residents[i]],
                   np.int64)

    def past():
        host = cluster.host_of[vms]
        share = cluster.shares(vms, cluster.capacity[host],
                               cluster.host_demand[host])
        return share < cluster.bounds(vms)

    def over():
        with np.errstate(divide='ignore', invalid='ignore'):
            return np.where(cluster.capacity > 0,
                            cluster.host_demand / cluster.capacity,
                            np.inf) > options.threshold

    past_before, hot_before = past(), over()
    demand_before = cluster.host_demand.copy()
    refused = []
    for vm, source, destination in moves:
        k = cluster.vm_index[vm]
        i, j = cluster.host_index[source], cluster.host_index[destination]
        if cluster.host_of[k] != i:
            raise ValueError('%s is not on %s' % (vm, source))
        load = demand.HostLoad(destination, int(cluster.capacity[j]),
                               int(cluster.host_demand[j]))
        if not demand.accepts(load, int(cluster.demand[k]), options.margin,
                              options.threshold):
            refused.append(vm)
        cluster.move(k, j)
    pushed = vms[past() & ~past_before]
    freed = np.maximum(demand_before - cluster.host_demand, 0)[hot_before]
    names = [host.name for host in cluster.hosts]
    return Score(
        freed_bytes=int(freed.sum()),
        hot_before=tuple(n for n, h in zip(names, hot_before) if h),
        hot_after=tuple(n for n, h in zip(names, over()) if h),
        pushed_past_bound=tuple(sorted(cluster.vms[k].name for k in pushed)),
        refused=tuple(refused), migrations=len(moves))


def miss_bound_bytes(vm, delta=DEFAULT_DELTA):
    """The least memory from which up to its flavor ``vm``'s relative
    miss ratio stays within ``1 + delta`` (0 without a curve)."""
    curves = _Curves([vm.curve], [vm.miss_floor])
    bound = curves.bounds(np.array([vm.flavor_bytes], np.int64), delta)
    return int(bound[0])
