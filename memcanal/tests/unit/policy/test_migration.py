import dataclasses
import random

import numpy as np
import pytest

from memcanal.policy import base
from memcanal.policy import demand
from memcanal.policy import migration
from memcanal.tests.unit.policy import curves as policy_curves

GB = 2 ** 30
NOW = 10_000.0
OPTIONS = migration.Options(hold_seconds=600, min_gain_bytes=GB // 4,
                            max_concurrent=10)


def step_curve(wss_gb, flavor_gb):
    """Misses everything below the working set, almost nothing above:
    its miss bound is the working set."""
    return base.curve_from_points([[0, 1.0], [int(wss_gb * GB), 0.01],
                                   [int(flavor_gb * GB), 0.01]])


def vm(name, demand_gb, flavor_gb=4, curve=None, groups=()):
    return migration.Instance(name, int(flavor_gb * GB), int(demand_gb * GB),
                              int(flavor_gb * GB), curve, tuple(groups))


def host(name, vms, capacity_gb=10, zone='nova', since=0.0):
    return migration.Host(name, int(capacity_gb * GB), tuple(vms), zone,
                          since)


def hot(name='hot', since=0.0, zone='nova'):
    # 9.7 GB of demand on 10 GB: 0.7 GB above the 90 % threshold.
    return host(name, [vm(name + '-a', 3.5, 8), vm(name + '-b', 3.2, 8),
                       vm(name + '-c', 3.0)], zone=zone, since=since)


def empty(name='cold', zone='nova', capacity_gb=10):
    return host(name, [], capacity_gb=capacity_gb, zone=zone, since=None)


def replay(hosts, moves, options=OPTIONS):
    """Apply moves one by one, checking each as the nova filter would."""
    loads = {h.name: h.load() for h in hosts}
    demands = {v.name: v.demand_bytes for h in hosts for v in h.instances}
    for move in moves:
        target = loads[move.destination]
        assert demand.accepts(target, demands[move.vm], options.margin,
                              options.threshold), move
        loads[move.destination] = target.with_demand(demands[move.vm])
        loads[move.source] = loads[move.source].with_demand(
            -demands[move.vm])
    return loads


def test_hot_host_relieved_by_its_cheapest_sufficient_move():
    hosts = [hot(), empty()]
    plan = migration.plan(hosts, NOW, options=OPTIONS)
    assert len(plan.moves) == 1
    move = plan.moves[0]
    # Every VM alone relieves the 0.7 GB; the smallest copy goes.
    assert (move.vm, move.source, move.destination) == ('hot-c', 'hot',
                                                        'cold')
    assert move.source_utilization == pytest.approx(0.67)
    assert move.destination_utilization == pytest.approx(0.3)
    assert move.gain_bytes == pytest.approx(0.7 * GB, rel=1e-6)
    assert plan.held == {}
    loads = replay(hosts, plan.moves)
    assert loads['hot'].utilization <= 0.9
    result = migration.score(hosts, plan.moves, OPTIONS)
    assert result.hot_before == ('hot',) and result.hot_after == ()
    assert result.freed_bytes == 3 * GB and result.migrations == 1


def test_a_paged_vm_stays_and_the_next_best_moves():
    source = hot()
    paged = dataclasses.replace(source.instances[2], movable=False)
    source = dataclasses.replace(source, instances=source.instances[:2]
                                 + (paged,))
    [move] = migration.plan([source, empty()], NOW, options=OPTIONS).moves
    assert move.vm != 'hot-c'


def test_a_destination_placement_refuses_takes_nothing():
    """hot-c (a 4 GB flavor) is the cheapest relief, but placement at
    ratio 1.0 has only 3 GB left on 'small' (its 7 GB flavor resident
    on 10 GB), and the others' flavors are larger: nothing is planned
    there; at ratio 1.1 (4 GB left) hot-c goes."""
    small = host('small', [vm('s1', 1, 7)], since=None)
    assert migration.plan([hot(), small], NOW,
                          options=OPTIONS).moves[0].vm == 'hot-c'
    strict = dataclasses.replace(small, allocation_ratio=1.0)
    plan = migration.plan([hot(), strict], NOW, options=OPTIONS)
    assert plan.moves == ()
    assert plan.held['hot']['reason'] == 'no_destination'
    roomy = dataclasses.replace(small, allocation_ratio=1.1)
    [move] = migration.plan([hot(), roomy], NOW, options=OPTIONS).moves
    assert move.vm == 'hot-c'


def test_placement_room_follows_the_planned_moves():
    """Two hot hosts, one destination with room in placement for one
    4 GB flavor: the second move finds none there."""
    cold = dataclasses.replace(empty(capacity_gb=40), allocation_ratio=0.15)
    options = dataclasses.replace(OPTIONS, max_concurrent=2)
    plan = migration.plan([hot('hot1'), hot('hot2'), cold], NOW,
                          options=options)
    assert [move.destination for move in plan.moves] == ['cold']


def test_cool_hosts_move_nothing():
    hosts = [host('a', [vm('a1', 4), vm('a2', 4)]), empty()]
    assert migration.plan(hosts, NOW, options=OPTIONS).moves == ()


def test_hold_time_respected():
    hosts = [hot(since=NOW - 599), hot('new', since=None), empty()]
    plan = migration.plan(hosts, NOW, options=OPTIONS)
    assert plan.moves == ()
    assert plan.held['hot']['reason'] == 'hold'
    assert plan.held['new']['reason'] == 'hold'
    plan = migration.plan(hosts, NOW + 1, options=OPTIONS)
    assert [m.source for m in plan.moves] == ['hot']


def test_anti_affinity_keeps_members_apart():
    groups = {'g': 'anti-affinity'}
    source = host('hot', [vm('x', 3.5, 8), vm('y', 3.2, 8, groups=['g']),
                          vm('z', 3.0, groups=['g'])])
    near = host('near', [vm('w', 1, groups=['g'])])
    far = host('far', [vm('f', 4)])
    plan = migration.plan([source, near, far], NOW, groups, OPTIONS)
    # z would go to the emptier 'near', but w of its group is there.
    assert [(m.vm, m.destination) for m in plan.moves] == [('z', 'far')]
    # Without 'far', no member may leave and x has nowhere either.
    plan = migration.plan([source, near, host('full', [vm('f', 6.5, 8)])],
                          NOW, groups, OPTIONS)
    assert [(m.vm, m.destination) for m in plan.moves] == [('x', 'near')]


def test_affinity_members_stay_together():
    groups = {'g': 'affinity'}
    source = host('hot', [vm('x', 3.5, groups=['g']),
                          vm('y', 3.2, groups=['g']), vm('z', 3.0, 8)])
    plan = migration.plan([source, empty()], NOW, groups, OPTIONS)
    assert [m.vm for m in plan.moves] == ['z']
    source = host('hot', [vm('x', 3.5, groups=['g']),
                          vm('y', 3.2, groups=['g']),
                          vm('z', 3.0, groups=['g'])])
    plan = migration.plan([source, empty()], NOW, groups, OPTIONS)
    assert plan.moves == ()
    assert plan.held['hot']['reason'] == 'no_destination'


def test_soft_anti_affinity_prefers_hosts_without_members():
    groups = {'g': 'soft-anti-affinity'}
    source = host('hot', [vm('x', 3.5, 8), vm('y', 3.2, 8),
                          vm('z', 3.0, groups=['g'])])
    emptiest = host('a', [vm('w', 0.5, groups=['g'])])
    other = host('b', [vm('v', 2)])
    plan = migration.plan([source, emptiest, other], NOW, groups, OPTIONS)
    assert [(m.vm, m.destination) for m in plan.moves] == [('z', 'b')]
    # Soft: with no other host it still goes.
    plan = migration.plan([source, emptiest], NOW, groups, OPTIONS)
    assert [(m.vm, m.destination) for m in plan.moves] == [('z', 'a')]


def test_moves_stay_in_the_availability_zone():
    hosts = [hot(zone='az1'), empty('other', zone='az2')]
    plan = migration.plan(hosts, NOW, options=OPTIONS)
    assert plan.moves == ()
    assert plan.held['hot']['reason'] == 'no_destination'
    anywhere = dataclasses.replace(OPTIONS, same_zone=False)
    plan = migration.plan(hosts, NOW, options=anywhere)
    assert [m.destination for m in plan.moves] == ['other']


def test_cap_respected_most_loaded_host_first():
    hosts = [hot('h1'), hot('h2'), host('h3', [vm('h3-a', 3.8),
                                               vm('h3-b', 3.2),
                                               vm('h3-c', 3.0)]),
             empty('c1'), empty('c2'), empty('c3')]
    capped = dataclasses.replace(OPTIONS, max_concurrent=2)
    plan = migration.plan(hosts, NOW, options=capped)
    assert len(plan.moves) == 2
    assert plan.moves[0].source == 'h3'
    assert [m.source for m in plan.moves] == ['h3', 'h1']
    assert plan.held['h2']['reason'] == 'cap'
    assert len({m.destination for m in plan.moves}) == 2


def test_no_move_the_filter_refuses():
    # 'edge' stays at 90 % with 3.0 GB more, not with 3.2 or 3.55;
    # 'full' takes nothing.
    edge = host('edge', [vm('e', 5.9, 8)])
    full = host('full', [vm('f', 8.9, 10)])
    source = host('hot', [vm('a', 3.55), vm('b', 3.2), vm('c', 3.0)])
    hosts = [source, edge, full]
    plan = migration.plan(hosts, NOW, options=OPTIONS)
    assert [(m.vm, m.destination) for m in plan.moves] == [('c', 'edge')]
    assert demand.accepts(edge.load(), 3 * GB)
    assert not demand.accepts(edge.load(), int(3.2 * GB))
    assert migration.score(hosts, plan.moves, OPTIONS).refused == ()
    # A wider margin leaves 'edge' 10 - 5.9 * 1.5 = 1.15 GB of headroom:
    # the filter, and so the planner, refuses even c.
    wide = dataclasses.replace(OPTIONS, margin=0.5)
    assert not demand.accepts(edge.load(), 3 * GB, margin=0.5)
    plan = migration.plan(hosts, NOW, options=wide)
    assert plan.moves == ()
    assert plan.held['hot']['reason'] == 'no_destination'


def test_random_clusters_never_plan_a_refused_move():
    rng = random.Random(7)
    for trial in range(30):
        hosts = []
        for h in range(rng.randint(2, 12)):
            vms = [vm('h%d-%d' % (h, i), rng.uniform(0.2, 3),
                      rng.choice([2, 4, 8]))
                   for i in range(rng.randint(0, 6))]
            hosts.append(host('h%d' % h, vms, rng.choice([8, 10, 16]),
                              rng.choice(['a', 'b']),
                              rng.choice([0.0, None, NOW])))
        plan = migration.plan(hosts, NOW, options=OPTIONS)
        replay(hosts, plan.moves)
        assert migration.score(hosts, plan.moves, OPTIONS).refused == ()
        assert len(plan.moves) <= OPTIONS.max_concurrent


def test_min_gain():
    # 1 GB above the threshold, every VM too small to relieve 0.25 GB.
    small = [vm('s%d' % i, 0.2, 1) for i in range(50)]
    hosts = [host('hot', small), empty()]
    plan = migration.plan(hosts, NOW, options=OPTIONS)
    assert plan.moves == ()
    assert plan.held['hot']['reason'] == 'min_gain'
    # An excess below the minimum: relieving all of it is enough.
    hosts = [host('hot', small[:46]), empty()]
    plan = migration.plan(hosts, NOW, options=OPTIONS)
    assert len(plan.moves) == 1
    # The fraction: a 0.2 GB relief is not worth copying 1 GB.
    costly = dataclasses.replace(OPTIONS, min_gain_fraction=0.5)
    assert migration.plan(hosts, NOW, options=costly).moves == ()


def test_partial_relief_takes_the_largest_gain_first():
    # 2.2 GB above the threshold; no VM alone covers it.
    source = host('hot', [vm('a', 1.5), vm('b', 2.0), vm('c', 1.8),
                          vm('d', 1.9), vm('e', 2.0)], capacity_gb=7.8)
    plan = migration.plan([source, empty('c1'), empty('c2')], NOW,
                          options=OPTIONS)
    # b and e relieve 2.0 GB each (ties go by name); then any VM
    # covers the 0.18 GB left, all as cheap to copy: a by name.
    assert [m.vm for m in plan.moves] == ['b', 'a']
    assert plan.moves[0].source_utilization > 0.9
    assert plan.moves[-1].source_utilization <= 0.9


def test_no_move_when_no_host_can_take_it():
    hosts = [hot(), host('busy', [vm('f', 8.5, 10)]), empty('tiny', 2)]
    plan = migration.plan(hosts, NOW, options=OPTIONS)
    assert plan.moves == ()
    assert plan.held['hot']['reason'] == 'no_destination'
    assert plan.held['hot']['utilization_after'] == pytest.approx(0.97)


def test_moved_vm_not_sent_below_its_miss_bound():
    # c needs 3.5 GB of memory (its curve), though its demand is 3 GB.
    source = host('hot', [vm('a', 3.5, 8), vm('b', 3.2, 8),
                          vm('c', 3.0, 4, step_curve(3.5, 4))])
    # On 'busiest' c would get 3 * 10 / 9 = 3.33 GB (below its bound),
    # on 'half' 3 * 10 / 8 = 3.75 GB; a and b have no curve.
    busiest = host('busiest', [vm('r', 6.0, 8)])
    plan = migration.plan([source, busiest], NOW, options=OPTIONS)
    assert plan.moves == ()
    assert plan.held['hot']['reason'] == 'miss_bound'
    half = host('half', [vm('r', 5.0, 8)])
    plan = migration.plan([source, busiest, half], NOW, options=OPTIONS)
    [move] = plan.moves
    assert (move.vm, move.destination) == ('c', 'half')
    assert move.destination_memory_bytes == pytest.approx(3.75 * GB, rel=1e-6)
    assert move.relative_miss_ratio == 1.0


def test_residents_not_pushed_below_their_miss_bound():
    # r (4 GB of demand) has 8 GB on 'b' and needs 5.5: with 3.5 GB more
    # demand there it would get 4 * 10 / 7.5 = 5.33 GB.
    resident = vm('r', 4.0, 8, step_curve(5.5, 8))
    source = host('hot', [vm('a', 3.6), vm('b', 3.5), vm('c', 3.4)])
    hosts = [source, host('dest', [resident])]
    plan = migration.plan(hosts, NOW, options=OPTIONS)
    assert plan.moves == ()
    assert plan.held['hot']['reason'] == 'miss_bound'
    # A move the planner would not make, scored: r is pushed past.
    result = migration.score(hosts, [('c', 'hot', 'dest')], OPTIONS)
    assert result.pushed_past_bound == ('r',)
    assert result.refused == ()


def test_score_counts_refused_moves_and_hosts_left_hot():
    hosts = [hot(), hot('other')]
    result = migration.score(hosts, [('hot-c', 'hot', 'other')], OPTIONS)
    assert result.refused == ('hot-c',)
    assert result.hot_after == ('other',)
    assert result.freed_bytes == 3 * GB
    with pytest.raises(ValueError):
        migration.score(hosts, [('hot-c', 'other', 'hot')], OPTIONS)


def test_plan_is_deterministic():
    rng = random.Random(3)
    hosts = [host('h%d' % h, [vm('v%d-%d' % (h, i), rng.uniform(0.5, 3))
                              for i in range(5)]) for h in range(12)]
    first = migration.plan(hosts, NOW, options=OPTIONS)
    assert first.moves
    shuffled = hosts[:]
    rng.shuffle(shuffled)
    assert migration.plan(shuffled, NOW, options=OPTIONS) == first


def test_curve_table_matches_each_curve():
    rng = np.random.default_rng(5)
    curves = []
    for _ in range(20):
        sizes = np.unique(rng.integers(0, 8 * GB, rng.integers(1, 40)))
        ratios = np.sort(rng.random(sizes.size))[::-1]
        curves.append(base.curve_from_points(list(zip(sizes.tolist(),
                                                      ratios.tolist()))))
    curves.insert(3, None)
    table = migration._Curves(curves, [base.MIN_MISS_RATIO] * len(curves))
    queries = rng.integers(0, 9 * GB, 50)
    for row, curve in enumerate(curves):
        got = table.at(np.full(queries.size, row), queries)
        want = np.ones(queries.size) if curve is None else curve.at(queries)
        np.testing.assert_array_equal(got, want)


def test_miss_bound_is_the_least_memory_within_delta():
    rng = np.random.default_rng(9)
    for i in range(30):
        sizes = np.unique(rng.integers(1, 8 * GB, rng.integers(2, 30)))
        ratios = rng.random(sizes.size)  # not even monotone
        curve = base.curve_from_points(list(zip(sizes.tolist(),
                                                ratios.tolist())))
        flavor = int(rng.integers(1, 8 * GB))
        # Half with a fault-rate curve's floor (base.miss_floor).
        floor = (base.MIN_MISS_RATIO if i % 2
                 else float(10 ** rng.uniform(-6, -1)))
        inst = migration.Instance('v', flavor, flavor, flavor, curve,
                                  miss_floor=floor)
        bound = migration.miss_bound_bytes(inst, delta=0.05)
        model = base.VM('v', flavor, curve, miss_floor=floor)
        # Every size from the bound to the flavor is within the bound...
        probe = np.concatenate([sizes, [0, flavor]])
        within = probe[(probe >= bound) & (probe <= flavor)]
        assert (model.relative_miss_ratio(within) <= 1.05 + 1e-12).all()
        # ...and just below it is not.
        if bound > 0:
            assert model.relative_miss_ratio(bound - 1) > 1.05
    assert migration.miss_bound_bytes(vm('n', 1)) == 0


def test_busy_hosts_take_no_part():
    hosts = [hot('h1'), hot('h2'), empty('c1'), empty('c2')]
    busy = dataclasses.replace(OPTIONS, busy_hosts=frozenset({'h1', 'c1'}))
    plan = migration.plan(hosts, NOW, options=busy)
    assert [(m.source, m.destination) for m in plan.moves] == [('h2', 'c2')]
    assert plan.held['h1']['reason'] == 'busy'


def test_one_move_per_host():
    # h3 needs two moves; with one_per_host it gets one, and each
    # destination takes one VM.
    h3 = host('h3', [vm('a', 3.5), vm('b', 3.5), vm('c', 3.5),
                     vm('d', 2.5)])
    hosts = [h3, hot('h1'), empty('c1'), empty('c2'), empty('c3')]
    single = dataclasses.replace(OPTIONS, one_per_host=True)
    plan = migration.plan(hosts, NOW, options=single)
    assert [(m.source, m.destination) for m in plan.moves] == [
        ('h3', 'c1'), ('h1', 'c2')]
    assert plan.held['h3']['reason'] == 'busy'
    plan = migration.plan(hosts, NOW, options=OPTIONS)
    assert [m.source for m in plan.moves] == ['h3', 'h3', 'h1']


def sampled(name, demand_gb, bound=0.002, points=policy_curves.SAMPLED):
    """A 4 GiB VM with a sampled curve (policy_curves.SAMPLED)."""
    model = policy_curves.sampled_vm(name, bound=bound, points=points)
    return migration.Instance(name, 4 * GB, int(demand_gb * GB), 4 * GB,
                              model.curve, miss_floor=model.miss_floor)


def test_a_sampled_vms_miss_bound_is_where_its_faults_meet_the_bound():
    assert migration.miss_bound_bytes(sampled('s', 1.5)) == (
        policy_curves.SAMPLED_BOUND_MB * base.MB)
    # As a curve of misses per access it would be 1300 MiB, faulting
    # 2.4 times the bound; a bound of 1 %/min allows that.
    plain = dataclasses.replace(sampled('s', 1.5),
                                miss_floor=base.MIN_MISS_RATIO)
    assert migration.miss_bound_bytes(plain) == 1300 * base.MB
    assert migration.miss_bound_bytes(sampled('s', 1.5, bound=0.01)) == (
        1300 * base.MB)
    # Faulting past the bound at every measured size: its flavor.
    streaming = sampled('s', 1.5, points=[(1024, 0.5), (2048, 0.01)])
    assert migration.miss_bound_bytes(streaming) == 4 * GB


def test_no_move_squeezes_a_sampled_resident_past_its_fault_bound():
    # The resident's demand is its 1 GiB working set and kernel; its
    # eq. 5 share on a 4.4 GiB destination falls from all of it to
    # 1.0625 * 4.4 / 3.6625 GiB (1307 MiB) once a 2.6 GiB VM lands:
    # below the 1400 MiB where its faults meet 0.2 % of its working set
    # per minute, above the 1300 MiB where they meet 1 %.
    hosts = [host('hot', [vm('mover', 2.6, 4), vm('stay', 3.0, 4),
                          vm('other', 3.9, 4)], capacity_gb=10),
             host('dest', [sampled('resident', 1.0625)], capacity_gb=4.4,
                  since=None)]
    plan = migration.plan(hosts, NOW, options=OPTIONS)
    assert plan.moves == ()
    assert plan.held['hot']['reason'] == 'miss_bound'
    hosts[1] = host('dest', [sampled('resident', 1.0625, bound=0.01)],
                    capacity_gb=4.4, since=None)
    [move] = migration.plan(hosts, NOW, options=OPTIONS).moves
    assert (move.vm, move.destination) == ('mover', 'dest')
