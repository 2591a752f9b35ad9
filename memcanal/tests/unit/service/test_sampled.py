"""A stock compute node's VMs report only what the sampler measures (a
``sampled`` working set and fault-rate curve, no PRL, no hcache): the
service's demand, ratios, memory targets, migrations and pooling act on
it, with faults held to [optimizer] fault_rate_bound."""

import types
from unittest import mock

import numpy as np
import pytest

from memcanal import context as memcanal_context
from memcanal.db import api as db_api
from memcanal.db import decisions as decisions_db
from memcanal.db import pooling as pooling_db
from memcanal.db import transitions
from memcanal.estimation import sampling
from memcanal.nova import client as nova_client
from memcanal.policy import base as policy_base
from memcanal.policy import demand
from memcanal.policy import guardrails
from memcanal.policy import isolated
from memcanal.policy import overcommit
from memcanal.policy import pooling as pooling_policy
from memcanal.rpc import reports
from memcanal.service import migrations
from memcanal.service import optimizer
from memcanal.service import placement
from memcanal.service import pooling
from memcanal.tests.unit.policy import curves

MIB = 2 ** 20
GIB = 2 ** 30
KERNEL = 64 * MIB
RAILS = guardrails.Rails(kernel_bytes=KERNEL)
BOUND_MB = curves.SAMPLED_BOUND_MB


def uuid(number):
    return '%08d-0000-4000-8000-%012d' % (number, number)


def sampled(number, allocated_gb=4, wss_gb=1.0, used_gb=2.0):
    """What the libvirt driver reports of a sampled guest."""
    return {'uuid': uuid(number), 'project_id': 'p1',
            'allocated_bytes': int(allocated_gb * GIB), 'flavor': 'm1.medium',
            'wss': {'sampled': int(wss_gb * GIB)},
            'mrc': {'sampled': [[size * MIB, ratio]
                                for size, ratio in curves.SAMPLED]},
            'guest_stats': dict(curves.SAMPLED_STATS,
                                used_bytes=used_gb * GIB)}


def hcache(number, allocated_gb=2):
    """A traced VM whose misses fall, less and less, up to 6 GiB."""
    sizes = range(2048, 6144, 16)
    return {'uuid': uuid(number), 'project_id': 'p1',
            'allocated_bytes': int(allocated_gb * GIB),
            'wss': {'prl': GIB},
            'mrc': {'hcache': [[size * MIB, 0.05 + 0.45 * 2 ** (
                -(size - 2048) / 512)] for size in sizes]},
            'guest_stats': {'used_bytes': 1.5 * GIB}}


def store(ctx, host, sequence, *samples):
    db_api.store_report(ctx, reports.validate_report({
        'host_uuid': host, 'sequence': sequence,
        'collected_at': '2026-12-01T09:00:%02dZ' % sequence,
        'instances': list(samples)}, max_mrc_points=256, max_instances=10))


def register(ctx, name, total_gb):
    return db_api.register_host(ctx, name, int(total_gb * GIB), 0,
                                60.0)['uuid']


@pytest.fixture
def ctx(database):
    return memcanal_context.get_admin_context()


def fault_rate(mib):
    """Faults per minute over the working set of a curves.SAMPLED VM with
    ``mib`` MiB."""
    return curves.sampled_vm().faults.per_minute(
        curves.sampled_vm().miss_ratio(mib * MIB))


def test_a_sampled_host_shows_measured_demand_and_earns_a_ratio(ctx):
    host = register(ctx, 'libvirt-1', 14)
    store(ctx, host, 1, *(sampled(n) for n in (1, 2, 3)))
    [listed] = db_api.list_hosts(ctx)
    # Working set plus kernel, not the 12 GiB allocated.
    assert listed['demand_bytes'] == 3 * (GIB + KERNEL)
    assert listed['allocated_bytes'] == 12 * GIB
    instances = db_api.list_instances(ctx, host_uuid=host)
    assert {i['wss_bytes'] for i in instances} == {GIB}
    proposal = overcommit.propose(1.0, placement.guests_of(instances))
    assert proposal.ideal == pytest.approx(0.9 * 12 / 3.1875)
    assert proposal.ratio == 1.1
    # The nova filter: a 4 GiB VM of the same flavor is expected to need
    # what its flavor's VMs measurably do, and fits where its flavor
    # would not (12 + 4 GiB allocated on 14).
    snapshot = nova_client.Snapshot.from_api(
        {'hosts': db_api.list_hosts(ctx)}, db_api.demand_ratios(ctx))
    load = snapshot.host_load(types.SimpleNamespace(host='libvirt-1',
                                                    nodename='libvirt-1'))
    spec = types.SimpleNamespace(project_id='p1', flavor=types.SimpleNamespace(
        name='m1.medium', memory_mb=4096))
    assert snapshot.expected_demand(spec) == GIB + KERNEL
    assert demand.accepts(load, snapshot.expected_demand(spec))


@pytest.fixture
def shared(conf, ctx):
    """A sampled 4 GiB VM and a hungry traced one on a 16 GiB host."""
    host = register(ctx, 'libvirt-1', 16)
    store(ctx, host, 1, sampled(1), hcache(2))
    conf.set_override('default_mechanism', 'hotplug', 'optimizer')
    return host


def test_isolated_sharing_shrinks_a_sampled_vm_down_to_its_fault_bound(
        conf, ctx, shared):
    [decision] = optimizer.Optimizer(conf).run(ctx)
    outputs = decision['outputs']
    policy_target = outputs['policy']['targets'][uuid(1)]
    # Down to where its faults meet 0.2 % of its working set per minute
    # (the hungry VM's curve is in 16 MiB steps), not below.
    assert BOUND_MB * MIB <= policy_target < (BOUND_MB + 16) * MIB
    assert fault_rate(policy_target / MIB) <= 0.002
    assert fault_rate(BOUND_MB - 4) > 0.002
    vm = outputs['instances'][uuid(1)]
    assert (vm['curve'], vm['fault_rate_bound']) == ('sampled', 0.002)
    # The guardrails' 5 % step; its faults predicted there.
    assert vm['target_bytes'] == 4 * GIB - int(0.05 * 4 * GIB)
    assert vm['predicted_fault_rate_per_min'] == pytest.approx(
        fault_rate(vm['target_bytes'] / MIB))
    assert vm['predicted_relative_miss_ratio'] == 1.0
    traced = outputs['instances'][uuid(2)]
    assert traced['curve'] == 'hcache'
    assert 'fault_rate_bound' not in traced
    assert decision['inputs']['instances'][uuid(1)]['curve'] == 'sampled'
    # A laxer bound lets it go further (once the operator rejected the
    # first: the same change, a guardrails' step, is not recommended
    # again while it waits).
    transitions.request_transition(ctx, decision['uuid'], 'reject')
    conf.set_override('fault_rate_bound', 0.01, 'optimizer')
    [laxer] = optimizer.Optimizer(conf).run(ctx)
    assert laxer['outputs']['policy']['targets'][uuid(1)] < BOUND_MB * MIB


def test_esx_finds_a_sampled_vms_active_memory_at_its_fault_bound(
        conf, ctx, shared):
    conf.set_override('policy', 'esx', 'optimizer')
    [decision] = optimizer.Optimizer(conf).run(ctx)
    details = decision['outputs']['policy']['details']
    assert details['active_bytes'][uuid(1)] == BOUND_MB * MIB
    assert decision['outputs']['instances'][uuid(1)]['curve'] == 'sampled'


def test_utube_balances_sampled_vms_on_their_guest_statistics(
        conf, ctx, shared):
    conf.set_override('policy', 'utube', 'optimizer')
    store(ctx, shared, 2, sampled(1, used_gb=3.9), hcache(2))
    [decision] = optimizer.Optimizer(conf).run(ctx)
    assert decision['outputs']['policy']['details']['under_allocated'] == [
        uuid(1)]
    vm = decision['outputs']['instances'][uuid(1)]
    # With all its memory and more, it takes no fault.
    assert vm['target_bytes'] > 4 * GIB
    assert vm['predicted_fault_rate_per_min'] == 0.0


def test_no_migration_squeezes_a_sampled_resident_past_its_fault_bound(
        conf, ctx):
    # 9.19 GiB of demand on the hot host's 10. The only destination has
    # 4.4 GiB and a sampled VM of 1 GiB working set, whose eq. 5 share
    # would fall to 1.0625 * 4.4 / 3.625 GiB (1321 MiB) as the 2.5 GiB
    # VM lands: under its 1400 MiB at 0.2 %/min, above 1300 at 1 %/min.
    hot = register(ctx, 'hot', 10)
    store(ctx, hot, 1, sampled(1, wss_gb=2.5), sampled(2, wss_gb=3.0),
          sampled(3, wss_gb=3.5))
    store(ctx, register(ctx, 'small', 4.4), 1, sampled(4))
    conf.set_override('enabled', True, 'migration')
    conf.set_override('hold_seconds', 0, 'migration')
    planner = migrations.MigrationPlanner(conf, RAILS)
    assert planner.run(ctx) == []
    conf.set_override('fault_rate_bound', 0.01, 'optimizer')
    [decision] = planner.run(ctx)
    move = decision['outputs']['move']
    assert (move['vm'], move['destination']) == (uuid(1), 'small')
    assert (move['curve'], move['fault_rate_bound']) == ('sampled', 0.01)
    assert move['predicted_fault_rate_per_min'] <= 0.01


def test_pooling_pages_a_sampled_vm_down_to_its_fault_bound(conf, ctx):
    small = register(ctx, 'small', 2)
    store(ctx, small, 1, sampled(1), sampled(2))
    conf.set_override('enabled', True, 'pooling')
    pooling_db.set_admitted(ctx, small, True)
    planner = pooling.PoolingPlanner(conf, RAILS)
    # The planner's inputs, then a lender of its own: which memory
    # servers may lend is not what this test is about.
    hosts, _lenders = planner.cloud(ctx, db_api.list_hosts(ctx))
    plan = pooling_policy.plan(hosts, [pooling_policy.Lender(
        'host-2', 'host-2', 16 * GIB)], planner.options(()))
    assert [p.resident_bytes for p in plan.pagings] == [BOUND_MB * MIB] * 2
    with mock.patch.object(decisions_db, 'create_pooling_decision') as made:
        planner._record(ctx, plan.pagings[0], {'host-2': uuid(9)}, plan)
    paging = made.call_args.args[-1]['paging']
    assert paging['resident_bytes'] == BOUND_MB * MIB
    assert (paging['curve'], paging['fault_rate_bound']) == ('sampled',
                                                             0.002)
    assert paging['predicted_fault_rate_per_min'] == pytest.approx(
        fault_rate(BOUND_MB))


def test_the_samplers_own_curve_gives_the_workloads_true_fault_rate():
    # 20,000 hot pages touched every 10 s interval, 60,000 warm ones in
    # six slices, a slice an interval: each interval 10,000 pages come
    # back after 6 intervals. In less memory than hot and warm together
    # they fault back: 60,000 per minute, twice the 30,000-page working
    # set. Sampled at 10 %, as a report carries it.
    accesses = sampling.SampledAccesses(1 << 20, 0.1, interval_s=10.0)
    hot = np.arange(20_000)
    for interval in range(30):
        warm = 20_000 + 10_000 * (interval % 6) + np.arange(10_000)
        accesses.add_interval(np.concatenate([hot, warm]))
    report = {'mrc': {'sampled': accesses.curve().compact(256, 4096)},
              'guest_stats': {'sampled_touches_per_s':
                              accesses.touches_per_s()}}
    wss = accesses.window_wss_bytes()
    curve = optimizer.policy_curve(report, wss, 4 * GIB, 0.002)
    assert wss == pytest.approx(30_000 * 4096, rel=0.05)
    assert curve.details(50_000 * 4096)['predicted_fault_rate_per_min'] == (
        pytest.approx(2.0, rel=0.1))
    # Beside a VM whose misses fall with every MiB up to 5 GiB, it may
    # lose only what holds neither set: down to its 80,000 pages.
    vm = policy_base.VM('vm', 4 * GIB, curve.curve, faults=curve.faults,
                        miss_floor=curve.miss_floor(0.05))
    sizes = np.arange(1024, 5121, 4)
    hungry = curves.vm('hungry', list(zip(sizes.tolist(), (
        0.05 + 0.45 * np.exp(-(sizes - 1024) / 1024)).tolist())),
        baseline=1024)
    allocation = isolated.isolated_sharing([vm, hungry], 5 * GIB, 0.05)
    assert allocation.targets['vm'] == pytest.approx(80_000 * 4096, rel=0.05)
    assert curve.details(allocation.targets['vm'])[
        'predicted_fault_rate_per_min'] <= 0.002
