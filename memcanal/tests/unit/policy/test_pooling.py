"""Memory pooling's planner: hot hosts page their coldest VMs out to the
memory servers of others, within every VM's miss bound, and take them
back when they have room."""

import dataclasses

from memcanal.policy import base
from memcanal.policy import pooling
from memcanal.tests.unit.policy import curves

MB = base.MB
GB = 1024 * MB


def vm(name, memory_gb=4, resident_gb=None, floor_gb=1, curve=None,
       lender=None):
    memory = int(memory_gb * GB)
    return pooling.Instance(
        name=name, memory_bytes=memory,
        resident_bytes=memory if resident_gb is None else int(
            resident_gb * GB),
        floor_bytes=int(floor_gb * GB), flavor_bytes=memory, curve=curve,
        lender=lender)


def curve(points_gb):
    return base.curve_from_points([[int(size * GB), ratio]
                                   for size, ratio in points_gb])


def hot_host(*vms, capacity_gb=10):
    return pooling.Host('hot', int(capacity_gb * GB), tuple(vms))


def lender(name='idle', free_gb=16, host=None):
    return pooling.Lender(name, host or name, int(free_gb * GB))


def test_a_hot_host_pages_its_coldest_vm_down_to_the_target():
    # 12 GiB resident on 10: down to 8.5 GiB (the 0.85 target).
    plan = pooling.plan([hot_host(vm('a', 4, floor_gb=3), vm('b', 8))],
                        [lender()])
    [paging] = plan.pagings
    assert (paging.vm, paging.lender) == ('b', 'idle')
    assert paging.resident_bytes == 8 * GB - int(3.5 * GB)
    assert paging.lent_bytes == int(3.5 * GB)
    assert paging.host_utilization_after <= 0.85
    assert plan.held == {}


def test_no_vm_keeps_less_than_its_floor_or_miss_bound():
    # b's misses rise fast below 6 GiB: its bound keeps 6 of its 8 GiB;
    # a's floor 3.5 of its 4. Both page what they may, not enough.
    steep = curve([(1, 1.0), (5.9, 0.5), (6, 0.01), (8, 0.01)])
    plan = pooling.plan([hot_host(vm('a', 4, floor_gb=3.5),
                                  vm('b', 8, curve=steep))], [lender()])
    assert [(p.vm, p.resident_bytes / GB) for p in plan.pagings] == [
        ('b', 6), ('a', 3.5)]
    assert plan.pagings[0].relative_miss_ratio <= 1 + pooling.DEFAULT_DELTA
    assert plan.held['hot']['reason'] == 'not enough cold memory'


def test_nothing_cold_holds_the_host():
    plan = pooling.plan([hot_host(vm('a', 6, floor_gb=6),
                                  vm('b', 6, floor_gb=6))], [lender()])
    assert plan.pagings == ()
    assert plan.held['hot']['reason'] == 'nothing cold'


def test_no_lender_on_the_hot_host_itself_nor_too_small():
    plan = pooling.plan([hot_host(vm('a', 4), vm('b', 8))],
                        [lender('self', host='hot'),
                         lender('small', free_gb=0.5)])
    assert plan.pagings == ()
    assert plan.held['hot']['reason'] == 'no lender'


def test_the_lender_with_most_room_is_chosen_and_its_room_shrinks():
    hosts = [hot_host(vm('a', 8, floor_gb=1), capacity_gb=5),
             pooling.Host('hot2', 5 * GB, (vm('c', 8, floor_gb=1),))]
    plan = pooling.plan(hosts, [lender('big', free_gb=5),
                                lender('small', free_gb=4.5)])
    assert [(p.vm, p.lender) for p in plan.pagings] == [('a', 'big'),
                                                        ('c', 'small')]


def test_a_paged_vm_pages_more_only_to_its_own_server():
    host = hot_host(vm('b', 8, resident_gb=6, floor_gb=1, lender='first'),
                    vm('a', 4, floor_gb=4))
    # 1.5 GiB more out: 3.5 lent in all, 2 of them already.
    plan = pooling.plan([host], [lender('first', free_gb=2),
                                 lender('other', free_gb=16)])
    [paging] = plan.pagings
    assert paging.lender == 'first'
    assert paging.lent_bytes == int(3.5 * GB)
    full = pooling.plan([host], [lender('first', free_gb=0.5),
                                 lender('other', free_gb=16)])
    assert full.pagings == ()


def test_a_host_with_room_takes_its_paged_vms_back_least_paged_first():
    host = pooling.Host('calm', 20 * GB, (
        vm('a', 4, resident_gb=2, lender='idle'),
        vm('b', 8, resident_gb=1, lender='idle')))
    plan = pooling.plan([host], [lender()])
    # 3 GiB resident; a (2 GiB paged) fits under 70 % of 20, then b (7).
    assert [(p.vm, p.resident_bytes, p.lender, p.lent_bytes)
            for p in plan.pagings] == [('a', 4 * GB, None, 0),
                                       ('b', 8 * GB, None, 0)]
    tight = pooling.Host('calm', 12 * GB, host.instances)
    assert [p.vm for p in pooling.plan([tight], [lender()]).pagings] == [
        'a']


def test_borrower_not_admitted_is_held_and_still_takes_back():
    host = dataclasses.replace(hot_host(vm('a', 4), vm('b', 8)),
                               admitted=False)
    plan = pooling.plan([host], [lender()])
    assert plan.pagings == ()
    assert plan.held['hot']['reason'] == pooling.NOT_ADMITTED
    # Taking back ends borrowing: a host not admitted (any more) may.
    calm = pooling.Host('calm', 20 * GB, (
        vm('a', 4, resident_gb=2, lender='idle'),), admitted=False)
    assert [p.vm for p in pooling.plan([calm], []).pagings] == ['a']


def test_busy_hosts_and_their_servers_are_left_alone():
    options = pooling.Options(busy_hosts=frozenset({'hot'}))
    assert pooling.plan([hot_host(vm('a', 4), vm('b', 8))], [lender()],
                        options).pagings == ()
    options = pooling.Options(busy_hosts=frozenset({'idle'}))
    assert pooling.plan([hot_host(vm('a', 4), vm('b', 8))], [lender()],
                        options).pagings == ()


def test_a_sampled_vm_pages_out_down_to_where_its_faults_meet_the_bound():
    # 4 GiB VMs with 1 GiB working sets (plus the kernel) on a 2 GiB
    # host: each may go down to 1400 MiB, where its faults are 0.2 % of
    # its working set per minute; 1300 MiB would fault 2.4 times that.
    model = curves.sampled_vm()
    sampled = pooling.Instance(
        name='s', memory_bytes=4 * GB, resident_bytes=4 * GB,
        floor_bytes=GB + 64 * MB, flavor_bytes=4 * GB, curve=model.curve,
        miss_floor=model.miss_floor)
    assert pooling.least_resident(sampled) == (
        curves.SAMPLED_BOUND_MB * MB)
    plain = dataclasses.replace(sampled, miss_floor=base.MIN_MISS_RATIO)
    assert pooling.least_resident(plain) == 1300 * MB
    plan = pooling.plan([hot_host(sampled, dataclasses.replace(
        sampled, name='t'), capacity_gb=2)], [lender()])
    assert [p.resident_bytes for p in plan.pagings] == [1400 * MB] * 2
    assert plan.pagings[0].relative_miss_ratio == 1.0
    assert plan.held['hot']['reason'] == 'not enough cold memory'
    # One faulting past the bound at every measured size pages nothing.
    streaming = curves.sampled_vm(points=[(1024, 0.5), (2048, 0.01)])
    assert pooling.least_resident(dataclasses.replace(
        sampled, curve=streaming.curve)) == 4 * GB
