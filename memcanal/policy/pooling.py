"""Memory pooling: which VMs page their cold memory out to which memory
servers, and which take it back.

TMemCanal (Li, Huang et al., sections III-IV) moves a VM's under-loaded
memory to remote free memory, so that a host short of memory serves
more, and hands released memory to the VMs that need it. Across a cloud
that is: hosts whose VMs hold more than ``threshold`` of their capacity
(what they keep resident: their memory, less what is paged out) page
the cold part of some VMs out to the memory servers of hosts with idle
memory, until they hold ``target`` of it; hosts with room again take
paged VMs back whole.

How much of a VM may go: what it keeps resident never falls below its
floor (working set plus kernel), nor below the least memory at which
its relative miss ratio (misses over misses at its flavor size, from its
curve) stays within ``1 + delta`` (Lu and Shen's isolation bound; the
pager's faults are those misses; for a fault-rate curve, where its
faults per minute meet their bound: base.miss_floor). VMs with the most
cold memory go first, and each pages out only what its host still
needs.

Where it goes: one memory server per VM, not on its own host, with the
most free memory that takes the VM's whole paged memory (the pager keeps
the second copy in a local file, so one server suffices for redundancy);
a VM already paged pages more out only to the server it uses.
"""

import dataclasses

from memcanal.policy import base
from memcanal.policy import migration

DEFAULT_THRESHOLD = 0.9
DEFAULT_TARGET = 0.85
DEFAULT_RELEASE = 0.7
DEFAULT_DELTA = migration.DEFAULT_DELTA
DEFAULT_MIN_PAGE_BYTES = 64 * base.MB
DEFAULT_UNIT_BYTES = base.DEFAULT_UNIT_BYTES
# Why a host over the threshold pages nothing out: no operator admitted
# it to pooling.
NOT_ADMITTED = 'not admitted'


@dataclasses.dataclass(frozen=True)
class Instance:
    """A VM as pooling sees it: ``memory_bytes`` it has (what it holds
    when nothing is paged), ``resident_bytes`` what it holds now,
    ``floor_bytes`` the least it may keep (its demand), ``flavor_bytes``
    what its misses are taken against, from ``miss_floor`` up
    (base.VM.miss_floor); ``lender`` the memory server holding its paged
    memory, if any."""

    name: str
    memory_bytes: int
    resident_bytes: int
    floor_bytes: int
    flavor_bytes: int
    curve: object = None
    lender: str | None = None
    miss_floor: float = base.MIN_MISS_RATIO

    @property
    def paged_bytes(self):
        return self.memory_bytes - self.resident_bytes


@dataclasses.dataclass(frozen=True)
class Host:
    """A host; ``admitted`` whether an operator admitted it to pooling:
    one that is not pages nothing out (its VMs may still take back what
    they borrow)."""

    name: str
    capacity_bytes: int
    instances: tuple = ()
    admitted: bool = True

    @property
    def resident_bytes(self):
        return sum(vm.resident_bytes for vm in self.instances)


@dataclasses.dataclass(frozen=True)
class Lender:
    """A memory server: ``host`` it runs on, ``free_bytes`` it can still
    lend (its capacity less its leases, and no more than its own host
    can spare)."""

    name: str
    host: str
    free_bytes: int


@dataclasses.dataclass(frozen=True)
class Options:
    threshold: float = DEFAULT_THRESHOLD
    target: float = DEFAULT_TARGET
    release: float = DEFAULT_RELEASE
    delta: float = DEFAULT_DELTA
    min_page_bytes: int = DEFAULT_MIN_PAGE_BYTES
    unit_bytes: int = DEFAULT_UNIT_BYTES
    busy_hosts: frozenset = frozenset()


@dataclasses.dataclass(frozen=True)
class Paging:
    """One VM's new resident size. ``lender`` holds its paged memory
    (``lent_bytes``, all it pages out); None with ``resident_bytes``
    equal to its memory: it takes everything back."""

    vm: str
    host: str
    resident_bytes: int
    previous_resident_bytes: int
    lender: str | None
    lent_bytes: int
    relative_miss_ratio: float
    host_utilization_after: float


@dataclasses.dataclass(frozen=True)
class Plan:
    pagings: tuple
    # Hosts still over the threshold after the plan, with why.
    held: dict


def least_resident(vm, delta=DEFAULT_DELTA):
    """The least a VM may keep resident: its floor, and its miss bound
    (migration.miss_bound_bytes) when it has a curve."""
    if vm.curve is None:
        return vm.floor_bytes
    bound = migration.miss_bound_bytes(migration.Instance(
        name=vm.name, memory_bytes=vm.memory_bytes,
        demand_bytes=vm.floor_bytes, flavor_bytes=vm.flavor_bytes,
        curve=vm.curve, miss_floor=vm.miss_floor), delta)
    return max(vm.floor_bytes, bound)


def _relative_miss_ratio(vm, size):
    policy_vm = base.VM(name=vm.name, baseline_bytes=vm.flavor_bytes,
                        curve=vm.curve, miss_floor=vm.miss_floor)
    return float(policy_vm.relative_miss_ratio(size))


def _round_up(value, unit):
    return -(-value // unit) * unit


def _lender_for(lenders, host, amount):
    """The lender, not on ``host``, with the most free memory that takes
    ``amount``, or None."""
    fitting = [lender for lender in lenders.values()
               if lender.host != host and lender.free_bytes >= amount]
    return max(fitting, key=lambda fit: (fit.free_bytes, fit.name),
               default=None)


def _page_out(host, lenders, options):
    """Pagings bringing ``host`` to the target, coldest VMs first; and
    why the host stays over the threshold, if it does."""
    resident = host.resident_bytes
    excess = resident - int(options.target * host.capacity_bytes)
    candidates = []
    for vm in host.instances:
        keep = min(_round_up(least_resident(vm, options.delta),
                             options.unit_bytes), vm.memory_bytes)
        if vm.resident_bytes - keep >= options.min_page_bytes:
            candidates.append((vm.resident_bytes - keep, vm, keep))
    pagings, unlent = [], False
    for cold, vm, keep in sorted(candidates, key=lambda c: (-c[0], c[1].name)):
        if excess <= 0:
            break
        step = min(cold, _round_up(excess, options.unit_bytes))
        if step < options.min_page_bytes:
            step = min(cold, options.min_page_bytes)
        new_resident = vm.resident_bytes - step
        lent = vm.memory_bytes - new_resident
        if vm.lender is None:
            lender = _lender_for(lenders, host.name, lent)
        else:
            # A paged VM's pages stay where they are: it pages more out
            # only to the server holding the rest.
            lender = lenders.get(vm.lender)
            if lender is not None and (
                    lender.free_bytes + vm.paged_bytes < lent):
                lender = None
        if lender is None:
            unlent = True
            continue
        lenders[lender.name] = dataclasses.replace(
            lender, free_bytes=lender.free_bytes - lent + (
                vm.paged_bytes if lender.name == vm.lender else 0))
        resident -= step
        excess -= step
        pagings.append(Paging(
            vm=vm.name, host=host.name, resident_bytes=new_resident,
            previous_resident_bytes=vm.resident_bytes, lender=lender.name,
            lent_bytes=lent,
            relative_miss_ratio=_relative_miss_ratio(vm, new_resident),
            host_utilization_after=resident / host.capacity_bytes))
    reason = None
    if resident > options.threshold * host.capacity_bytes:
        reason = ('no lender' if unlent else 'not enough cold memory'
                  if candidates else 'nothing cold')
    return pagings, reason


def _take_back(host, options):
    """Paged VMs of ``host`` that fit whole under the release level, the
    least paged first."""
    resident = host.resident_bytes
    limit = options.release * host.capacity_bytes
    pagings = []
    for vm in sorted((vm for vm in host.instances if vm.paged_bytes > 0),
                     key=lambda vm: (vm.paged_bytes, vm.name)):
        if resident + vm.paged_bytes > limit:
            break
        resident += vm.paged_bytes
        pagings.append(Paging(
            vm=vm.name, host=host.name, resident_bytes=vm.memory_bytes,
            previous_resident_bytes=vm.resident_bytes, lender=None,
            lent_bytes=0, relative_miss_ratio=_relative_miss_ratio(
                vm, vm.memory_bytes),
            host_utilization_after=resident / host.capacity_bytes))
    return pagings


def plan(hosts, lenders, options=Options()):
    """The pagings of ``hosts`` with ``lenders`` (memory servers), most
    loaded hosts first; hosts in ``options.busy_hosts`` are left alone
    (another decision concerns them), and hosts not admitted borrow
    nothing (held: NOT_ADMITTED). Lenders are those of admitted hosts
    only: the caller leaves the others out."""
    available = {lender.name: lender for lender in lenders
                 if lender.host not in options.busy_hosts}
    pagings, held = [], {}
    for host in sorted(hosts, key=lambda h: (
            -h.resident_bytes / max(h.capacity_bytes, 1), h.name)):
        if host.name in options.busy_hosts or host.capacity_bytes <= 0:
            continue
        utilization = host.resident_bytes / host.capacity_bytes
        if utilization > options.threshold and not host.admitted:
            held[host.name] = {'utilization': utilization,
                               'reason': NOT_ADMITTED}
        elif utilization > options.threshold:
            out, reason = _page_out(host, available, options)
            pagings.extend(out)
            if reason:
                held[host.name] = {'utilization': utilization,
                                   'reason': reason}
        elif utilization < options.release:
            pagings.extend(_take_back(host, options))
    return Plan(pagings=tuple(pagings), held=held)
