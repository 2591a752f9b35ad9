"""/hosts and /hosts/{uuid}."""

import re

import pytest

from memcanal.api import errors
from memcanal import context
from memcanal.db import api as db_api
from memcanal.tests.unit.api import base
from memcanal.tests.unit.api import data

ISO_Z = re.compile(r'^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$')


def test_list_hosts(client, hosts):
    response = client.admin('/hosts')
    assert response.status_int == 200
    listed = response.json['hosts']
    assert [h['name'] for h in listed] == ['host-a', 'host-b']
    host_a = listed[0]
    assert host_a['uuid'] == hosts['host-a']
    assert host_a['memory_total_bytes'] == 64 * data.GIB
    assert host_a['memory_reserved_bytes'] == 2 * data.GIB
    assert host_a['state'] == 'up'
    assert host_a['instance_count'] == len(data.HOST_A_INSTANCES)
    assert host_a['last_sequence'] == data.HOST_A_REPORTS
    assert host_a['reports_rejected'] == 0
    assert ISO_Z.match(host_a['last_heartbeat_at'])
    assert ISO_Z.match(host_a['created_at'])
    assert 'id' not in host_a
    assert listed[1]['instance_count'] == len(data.HOST_B_INSTANCES)


def test_list_hosts_empty(client, database):
    assert client.admin('/hosts').json == {'hosts': []}


def test_show_host(client, hosts):
    response = client.admin('/hosts/%s' % hosts['host-b'])
    assert response.status_int == 200
    assert response.json['uuid'] == hosts['host-b']
    assert response.json['name'] == 'host-b'
    assert response.json['memory_total_bytes'] == 32 * data.GIB
    assert response.json == [
        h for h in client.admin('/hosts').json['hosts']
        if h['uuid'] == hosts['host-b']][0]


def test_show_unknown_host_is_404(client, hosts):
    error = base.assert_error(client.admin('/hosts/%s' % data.UNKNOWN),
                              404, errors.HOST_NOT_FOUND)
    assert data.UNKNOWN in error['detail']


@pytest.mark.parametrize('bad', ['not-a-uuid', '1234', 'x' * 36])
def test_show_invalid_uuid_is_404(client, hosts, bad):
    error = base.assert_error(client.admin('/hosts/%s' % bad), 404,
                              errors.HOST_NOT_FOUND)
    assert bad in error['detail']


@pytest.mark.parametrize('path', ['/hosts', '/hosts/{uuid}'])
def test_project_reader_cannot_see_hosts(client, hosts, path):
    response = client.reader(path.format(uuid=hosts['host-a']))
    error = base.assert_error(response, 403, errors.POLICY_DENIED)
    assert 'memcanal:hosts:' in error['detail']


def test_project_member_cannot_see_hosts(client, hosts):
    response = client.request('/hosts', token='bob', roles='member')
    base.assert_error(response, 403, errors.POLICY_DENIED)


def test_hosts_take_no_query_parameters(client, hosts):
    error = base.assert_error(client.admin('/hosts?limit=1'), 400,
                              errors.QUERY_INVALID)
    assert 'limit' in error['detail']


def test_report_interval_from_microversion_1_3(client, hosts):
    listed = client.admin('/hosts', headers={
        'OpenStack-API-Version': 'memcanal 1.3'}).json['hosts']
    # host-b registered without one (an older agent).
    assert [h['report_interval'] for h in listed] == [30.0, None]
    assert 'report_interval' not in client.admin('/hosts').json['hosts'][0]


V14 = {'OpenStack-API-Version': 'memcanal 1.4'}


def test_measured_demand_from_microversion_1_4(client, hosts):
    listed = client.admin('/hosts', headers=V14).json['hosts']
    # Each VM's latest PRL working set plus the 64 MiB kernel: host-a's
    # three at report 3 (240 MiB), host-b's two at report 1 (80 MiB).
    host_a, host_b = listed
    assert host_a['capacity_bytes'] == 62 * data.GIB
    assert host_a['demand_bytes'] == 3 * 304 * data.MIB
    assert host_a['headroom_bytes'] == 62 * data.GIB - 3 * 304 * data.MIB
    assert host_a['utilization'] == 3 * 304 * data.MIB / (62 * data.GIB)
    assert host_b['demand_bytes'] == 2 * 144 * data.MIB
    assert (host_a['availability_zone'], host_a['allocation_ratio']) == (
        None, None)
    assert 'demand_bytes' not in client.admin('/hosts').json['hosts'][0]


def test_nova_scheduler_service_role_reads_hosts(client, hosts):
    response = client.request('/hosts', token='nova', roles='service',
                              headers=V14)
    assert response.status_int == 200
    assert len(response.json['hosts']) == 2


def test_hypervisor_type_and_nova_managed_from_1_7(client, hosts):
    """A Xen host says so, and that nova does not manage it; a host whose
    agent never said is taken as nova's, as before."""
    db_api.register_host(context.get_admin_context(), 'host-a',
                         64 * data.GIB, 2 * data.GIB, 30.0,
                         hypervisor_type='xen')
    at_1_7 = {'OpenStack-API-Version': 'memcanal 1.7'}
    listed = {host['name']: host for host in client.admin(
        '/hosts', headers=at_1_7).json['hosts']}
    assert (listed['host-a']['hypervisor_type'],
            listed['host-a']['nova_managed']) == ('xen', False)
    assert (listed['host-b']['hypervisor_type'],
            listed['host-b']['nova_managed']) == (None, True)
    before = client.admin('/hosts', headers={
        'OpenStack-API-Version': 'memcanal 1.6'}).json['hosts'][0]
    assert 'hypervisor_type' not in before and 'nova_managed' not in before


def test_demand_bounds_from_1_8(client, hosts):
    """A sampled VM's demand counts the upper bound of its working set;
    the host's interval sums its VMs' from both bounds."""
    data.store_sampled(hosts['host-b'], 2, data.HOST_B_INSTANCES, {data.A3})
    at_1_8 = {'OpenStack-API-Version': 'memcanal 1.8'}
    host_a, host_b = client.admin('/hosts', headers=at_1_8).json['hosts']
    assert host_a['demand_bounds_bytes'] == [3 * 304 * data.MIB] * 2
    # A3: 180 to 230 MiB and the 64 MiB kernel; B2: PRL's 160 MiB at its
    # second report, and the kernel.
    assert host_b['demand_bounds_bytes'] == [(244 + 224) * data.MIB,
                                             (294 + 224) * data.MIB]
    assert host_b['demand_bytes'] == (294 + 224) * data.MIB
    shown = client.admin('/hosts/%s' % hosts['host-b'], headers=at_1_8).json
    assert shown['demand_bounds_bytes'] == host_b['demand_bounds_bytes']
    assert 'demand_bounds_bytes' not in client.admin('/hosts', headers={
        'OpenStack-API-Version': 'memcanal 1.7'}).json['hosts'][0]
