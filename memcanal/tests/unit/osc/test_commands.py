"""Each ``openstack memcanal`` command's take_action on the seeded API."""

import io
import json
from unittest import mock

from osc_lib import exceptions
import pytest

from memcanal.api import microversion
from memcanal import context
from memcanal.db import decisions as decisions_db
from memcanal.cmd import plan as plan_cli
from memcanal.osc.v1 import decisions
from memcanal.osc.v1 import hosts
from memcanal.osc.v1 import instances
from memcanal.osc.v1 import plan
from memcanal.osc.v1 import reports
from memcanal.tests.unit.api import data
from memcanal.tests.unit.osc import conftest

MIB = 2 ** 20


def rows(result):
    """A Lister's rows as dicts by column."""
    columns, values = result
    return [dict(zip(columns, row)) for row in values]


def fields(result):
    """A ShowOne's fields as a dict."""
    return dict(zip(*result))


def test_host_list_and_show_by_name_or_uuid(run, api):
    _, host_uuids, _ = api
    listed = rows(run(hosts.ListHost))
    assert [(h['Name'], h['Instances'], h['Memory (MiB)'])
            for h in listed] == [('host-a', 3, 65536), ('host-b', 2, 32768)]
    by_name = fields(run(hosts.ShowHost, 'host-b'))
    assert by_name['uuid'] == host_uuids['host-b']
    assert fields(run(hosts.ShowHost, host_uuids['host-b'])) == by_name
    with pytest.raises(exceptions.CommandError, match='No memcanal host is '
                       'named host-z'):
        run(hosts.ShowHost, 'host-z')


def test_instance_list_filters(run):
    assert [i['UUID'] for i in rows(run(instances.ListInstance))] == data.ALL
    on_b = rows(run(instances.ListInstance, '--host', 'host-b'))
    assert [i['UUID'] for i in on_b] == data.HOST_B_INSTANCES
    assert {i['Host'] for i in on_b} == {'host-b'}
    assert on_b[0]['Memory (MiB)'] == 4096
    # The seed's last report of host-b is its first: WSS 80 MiB by PRL.
    assert on_b[0]['WSS (MiB)'] == 80
    of_b = rows(run(instances.ListInstance, '--project', data.PROJECT_B))
    assert [i['UUID'] for i in of_b] == [data.B1, data.B2]


def test_lists_keep_host_uuids_for_who_may_not_list_hosts(run, client,
                                                          monkeypatch, api):
    """A project reader lists its VMs but not the hosts."""
    get = client.get

    def get_but_hosts(path, params=None):
        if path == '/hosts':
            raise exceptions.Forbidden(403, 'memcanal.policy.denied')
        return get(path, params)
    monkeypatch.setattr(client, 'get', get_but_hosts)
    listed = rows(run(instances.ListInstance, '--project', data.PROJECT_B))
    assert [i['Host'] for i in listed] == [api[1]['host-a'],
                                           api[1]['host-b']]


def test_instance_show_spells_out_the_latest_report(run):
    shown = fields(run(instances.ShowInstance, data.A1))
    assert 'latest_report' not in shown
    assert shown['latest_report_sequence'] == data.HOST_A_REPORTS
    assert shown['wss_mib'].machine_readable() == {
        'distinct': 300, 'ewma': 270, 'prl': 240}
    assert shown['miss_ratio_curve'].machine_readable() == data.mrc(
        data.HOST_A_REPORTS)
    assert 'miss ratio by memory (exact)' in (
        shown['miss_ratio_curve'].human_readable())


def test_instance_set_builds_the_patch(run):
    changed = fields(run(instances.SetInstance, data.A1, '--opt-out',
                         '--floor', '1024', '--ceiling', '3072',
                         '--mechanism', 'hotplug'))
    assert (changed['opt_out'], changed['floor_bytes'],
            changed['ceiling_bytes'], changed['mechanism']) == (
        True, 1024 * MIB, 3072 * MIB, 'hotplug')
    cleared = fields(run(instances.SetInstance, data.A1, '--opt-in',
                         '--no-floor', '--no-ceiling', '--mechanism',
                         'default'))
    assert (cleared['opt_out'], cleared['floor_bytes'],
            cleared['ceiling_bytes'], cleared['mechanism']) == (
        False, None, None, None)
    with pytest.raises(exceptions.CommandError, match='Nothing to set'):
        run(instances.SetInstance, data.A1)
    # A floor above the ceiling: the API's 400, with its code.
    with pytest.raises(exceptions.BadRequest, match='memcanal.body.invalid'):
        run(instances.SetInstance, data.A1, '--floor', '2048', '--ceiling',
            '1024')
    with pytest.raises(SystemExit):
        run(instances.SetInstance, data.A1, '--floor', '1', '--no-floor')
    for wrong in ('abc', '-5', '1.5'):
        with pytest.raises(SystemExit):
            run(instances.SetInstance, data.A1, '--floor', wrong)


def test_report_list(run):
    listed = rows(run(reports.ListReport, data.A1))
    assert [r['Sequence'] for r in listed] == [3, 2, 1]
    assert listed[0]['WSS (MiB)'].machine_readable() == {
        'distinct': 300, 'ewma': 270, 'prl': 240}
    assert listed[0]['Curves'].human_readable() == 'exact'
    assert listed[0]['Curves'].machine_readable() == data.mrc(3)
    assert listed[0]['WSS (MiB)'].human_readable() == (
        'distinct=300, ewma=270, prl=240')
    newest = rows(run(reports.ListReport, data.A1, '--limit', '2'))
    assert [r['Sequence'] for r in newest] == [3, 2]


def test_decision_list_show_and_transitions(run, api):
    _, host_uuids, decision = api
    [listed] = rows(run(decisions.ListDecision, '--state', 'recommended',
                        '--host', 'host-a', '--kind', 'memory_targets'))
    assert (listed['UUID'], listed['Host']) == (decision, 'host-a')
    assert rows(run(decisions.ListDecision, '--kind', 'migration')) == []
    assert rows(run(decisions.ListDecision, '--host', 'host-b')) == []
    shown = fields(run(decisions.ShowDecision, decision))
    assert shown['actions'].human_readable() == (
        'set_target %s: 4096 -> 3072 MiB [pending]' % data.A1)
    assert shown['events'].human_readable().endswith(' - -> recommended')
    approved = fields(run(decisions.ApproveDecision, decision, '--reason',
                          'night window'))
    assert approved['state'] == 'approved'
    assert approved['events'].machine_readable()[-1]['reason'] == (
        'night window')
    assert approved['events'].human_readable().endswith(
        'recommended -> approved by admin: night window')
    with pytest.raises(exceptions.Conflict,
                       match='memcanal.decision.state_conflict'):
        run(decisions.RejectDecision, decision)
    with pytest.raises(exceptions.BadRequest,
                       match='memcanal.query.invalid'):
        run(decisions.ListDecision, '--state', 'happy')


def test_decision_list_limit_reads_only_the_pages_it_needs(run, api, gets):
    """--limit is the API's page size too; --kind, filtered here, reads
    on until it has --limit decisions of the kind."""
    _, host_uuids, oldest = api
    ctx = context.get_admin_context()
    # Three different changes: an identical one is not recorded again.
    newer = [decisions_db.create_decision(
        ctx, host_uuids['host-b'], 'migration', 'migration', 'recommend',
        {}, {}, [{'instance_uuid': data.A3,
                  'target_bytes': data.GIB + step * 4096,
                  'previous_bytes': None, 'mechanism': 'balloon'}])['uuid']
        for step in range(3)]
    paths = gets
    newest = rows(run(decisions.ListDecision, '--limit', '2'))
    assert [d['UUID'] for d in newest] == newer[::-1][:2]
    assert [d['Host'] for d in newest] == ['host-b', 'host-b']
    assert sorted(paths) == ['/decisions', '/hosts']
    del paths[:]
    [listed] = rows(run(decisions.ListDecision, '--limit', '1', '--kind',
                        'memory_targets'))
    assert listed['UUID'] == oldest
    # A page of one decision each: the three migrations, then the one.
    assert len([p for p in paths if p.startswith('/decisions')]) == 4


def test_decisions_need_1_1(api, monkeypatch):
    monkeypatch.setattr(microversion, 'VERSIONS', ['1.0'])
    app = mock.Mock()
    app.client_manager.memcanal = conftest.make_client(api[0])
    command = decisions.ListDecision(app, None)
    with pytest.raises(exceptions.CommandError, match='Decisions need '
                       'memcanal API 1.1'):
        command.take_action(command.get_parser('x').parse_args([]))


PLAN_INPUT = {'vms': [
    {'name': 'cache', 'baseline_mb': 1024,
     'mrc': [[256, 0.5], [512, 0.1], [1024, 0.0]]},
    {'name': 'scan', 'baseline_mb': 1024,
     'mrc': [[256, 0.9], [512, 0.8], [1024, 0.7]]}]}


def _targets(result):
    targets = {}
    for row in rows(result):
        targets.setdefault(row['Policy'], {})[row['VM']] = row[
            'Target (MiB)']
    return targets


def test_plan_a_file_is_memcanal_plan(run, tmp_path, monkeypatch):
    path = tmp_path / 'vms.json'
    path.write_text(json.dumps(PLAN_INPUT))
    expected = {name: policy['targets_mb'] for name, policy
                in plan_cli.plan(PLAN_INPUT)['policies'].items()}
    assert _targets(run(plan.Plan, str(path))) == expected
    monkeypatch.setattr('sys.stdin', io.StringIO(json.dumps(PLAN_INPUT)))
    assert _targets(run(plan.Plan, '-')) == expected
    larger = run(plan.Plan, str(path), '--total', '3072')
    for name, targets in _targets(larger).items():
        [unallocated] = {row['Unallocated (MiB)'] for row in rows(larger)
                         if row['Policy'] == name}
        assert sum(targets.values()) + unallocated == 3072


def test_plan_input_errors(run, tmp_path):
    path = tmp_path / 'vms.json'
    path.write_text(json.dumps({'vms': [{'name': 'a', 'baseline_mb': 1,
                                         'mrc': [[1, 2]]}]}))
    with pytest.raises(exceptions.CommandError,
                       match='Invalid plan input at vms/0/mrc/0/1'):
        run(plan.Plan, str(path))
    path.write_text('{')
    with pytest.raises(exceptions.CommandError):
        run(plan.Plan, str(path))
    with pytest.raises(exceptions.CommandError, match='No such file'):
        run(plan.Plan, str(tmp_path / 'missing.json'))
    with pytest.raises(SystemExit):
        run(plan.Plan)


def test_plan_a_live_host(run, client):
    # A2 opts out: the plan leaves it out as the optimizer does.
    client.patch('/instances/%s' % data.A2, {'opt_out': True,
                                             'floor_bytes': None})
    client.patch('/instances/%s' % data.B1, {'floor_bytes': 1024 * MIB})
    description = plan.host_description(client, 'host-a')
    assert [vm['name'] for vm in description['vms']] == [data.A1, data.B1]
    a1, b1 = description['vms']
    assert a1['baseline_mb'] == 4096
    # The seed's curve at report 3, in MiB.
    assert a1['mrc'] == [[256, 0.5 / 3], [512, 0.0]]
    assert 'min_mb' not in a1 and b1['min_mb'] == 1024
    targets = _targets(run(plan.Plan, '--host', 'host-a', '--total',
                           '4096'))
    for policy in targets.values():
        assert set(policy) == {data.A1, data.B1}
        assert policy[data.B1] >= 1024


def test_plan_a_host_without_curves(run, client):
    for uuid in data.HOST_B_INSTANCES:
        client.patch('/instances/%s' % uuid, {'opt_out': True})
    with pytest.raises(exceptions.CommandError, match='no VM with a '
                       'miss-ratio curve'):
        run(plan.Plan, '--host', 'host-b')


def test_the_intervals_of_a_sampled_vm(run, api):
    """API 1.8's intervals: the VM's working set's in the list, the
    host's demand's, and the latest report's in show, its curve charted
    with its band."""
    _, host_uuids, _ = api
    data.store_sampled(host_uuids['host-b'], 2, data.HOST_B_INSTANCES,
                       {data.A3})
    listed = {i['UUID']: i for i in rows(run(instances.ListInstance))}
    assert listed[data.A3]['WSS 95 % (MiB)'].machine_readable() == [180, 230]
    assert listed[data.A3]['WSS 95 % (MiB)'].human_readable() == '180..230'
    assert listed[data.B2]['WSS 95 % (MiB)'].machine_readable() is None
    host_b = rows(run(hosts.ListHost))[1]
    assert host_b['Demand 95 % (MiB)'].human_readable() == '468..518'
    shown = fields(run(instances.ShowInstance, data.A3))
    assert shown['wss_95_mib'].human_readable() == 'sampled=180..230'
    assert shown['wss_bounds_bytes'] == data.SAMPLED_BOUNDS
    assert 'miss ratio by memory (sampled, 95 % band: .)' in (
        shown['miss_ratio_curve'].human_readable())
    assert shown['miss_ratio_band'].machine_readable() == {
        'sampled': data.SAMPLED_BAND}
    [newest, _] = rows(run(reports.ListReport, data.A3))
    assert newest['WSS 95 % (MiB)'].machine_readable() == {
        'sampled': [180, 230]}
