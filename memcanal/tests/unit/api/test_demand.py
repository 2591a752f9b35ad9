"""/demand_ratios (microversion 1.4)."""

from memcanal.api import errors
from memcanal.tests.unit.api import base
from memcanal.tests.unit.api import data

V14 = {'OpenStack-API-Version': 'memcanal 1.4'}
# A VM at report 3 needs 240 + 64 MiB, at report 1 80 + 64 MiB, of 4 GiB.
LATER, FIRST = 304 / 4096, 144 / 4096


def test_demand_ratios_by_flavor_and_project(client, hosts):
    response = client.admin('/demand_ratios', headers=V14)
    assert response.status_int == 200
    # project-a: A1 and A2 at report 3, A3 at report 1: nine in ten need
    # up to the larger. project-b: B1 at 3, B2 at 1.
    assert response.json == {
        'flavors': {'m1.medium': {'ratio': LATER, 'instances': 3},
                    'm1.large': {'ratio': LATER, 'instances': 2}},
        'projects': {data.PROJECT_A: {'ratio': LATER, 'instances': 3},
                     data.PROJECT_B: {'ratio': LATER, 'instances': 2}},
        'percentile': 90}


def test_demand_ratios_of_an_empty_cloud(client, database):
    assert client.admin('/demand_ratios', headers=V14).json == {
        'flavors': {}, 'projects': {}, 'percentile': 90}


def test_demand_ratios_need_microversion_1_4(client, hosts):
    base.assert_error(client.admin('/demand_ratios'), 404,
                      errors.ROUTE_NOT_FOUND)


def test_demand_ratios_for_the_service_role_not_a_reader(client, hosts):
    assert client.request('/demand_ratios', token='nova', roles='service',
                          headers=V14).status_int == 200
    base.assert_error(client.reader('/demand_ratios', headers=V14), 403,
                      errors.POLICY_DENIED)
