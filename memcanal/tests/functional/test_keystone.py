"""The REST API behind a real keystone: tokens, roles and projects.

keystone runs from tools/keystone.sh in its own process; users, projects
and role assignments are made through its API, tokens are real fernet
tokens, and memcanal's keystonemiddleware validates them against it.
"""

from keystoneauth1.identity import v3
from keystoneauth1 import session as ks_session
from keystoneclient.v3 import client as ks_client
import pytest
import requests

from memcanal.api import deploy
from memcanal.api import errors
from memcanal import context as memcanal_context
from memcanal.db import api as db_api
from memcanal.tests.functional import services
from memcanal.tests.functional import test_api
from memcanal.tests import fixtures as memcanal_fixtures
from memcanal.tests.unit.api import data
from memcanal.tests.unit.db import test_api as cases

PASSWORD = 'memcanal-persona'


def password_session(url, user, project):
    password = (services.KEYSTONE_ADMIN_PASSWORD if user == 'admin'
                else PASSWORD)
    return ks_session.Session(auth=v3.Password(
        auth_url=url, username=user, password=password,
        project_name=project, user_domain_id='default',
        project_domain_id='default'))


@pytest.fixture(scope='module')
def cloud(keystone_url):
    """Projects a and b; a reader of a, a member of b; their ids."""
    admin = ks_client.Client(
        session=password_session(keystone_url, 'admin', 'admin'))
    roles = {role.name: role for role in admin.roles.list()}
    projects = {}
    for name, user, role in (('project-a', 'reader-a', 'reader'),
                             ('project-b', 'member-b', 'member')):
        project = admin.projects.create(name, 'default')
        person = admin.users.create(user, domain='default',
                                    password=PASSWORD)
        admin.roles.grant(roles[role], user=person, project=project)
        projects[name] = project.id
    return projects


def test_personas_with_real_tokens(keystone_url, cloud, conf,
                                   keystone_conf):
    keystone_conf(keystone_url, services.KEYSTONE_ADMIN_PASSWORD)
    with data.using(memcanal_fixtures.Database()):
        ctx = memcanal_context.get_admin_context()
        host = cases.register(ctx)
        db_api.store_report(ctx, cases.report(
            host, 1, cases.sample(cases.VM_1, 1, cloud['project-a']),
            cases.sample(cases.VM_2, 1, cloud['project-b'])))
        with test_api.serving(deploy.loadapp(conf)) as url:
            def get(path, who, project):
                return test_api.get(url, path, token=password_session(
                    keystone_url, who, project).get_token())

            def listed(who, project):
                response = get('/instances', who, project)
                assert response.status_code == 200, response.text
                return [i['uuid'] for i in response.json()['instances']]

            assert listed('admin', 'admin') == [cases.VM_1, cases.VM_2]
            assert get('/hosts', 'admin', 'admin').status_code == 200
            # A reader sees its project's instance and nothing else.
            assert listed('reader-a', 'project-a') == [cases.VM_1]
            shown = get('/instances/%s' % cases.VM_1, 'reader-a',
                        'project-a')
            assert shown.json()['latest_report']['wss']['distinct'] > 0
            test_api.assert_error(
                get('/instances/%s' % cases.VM_2, 'reader-a', 'project-a'),
                403, errors.POLICY_DENIED)
            test_api.assert_error(get('/hosts', 'reader-a', 'project-a'),
                                  403, errors.POLICY_DENIED)
            # keystone's member role implies reader.
            assert listed('member-b', 'project-b') == [cases.VM_2]
            # A token keystone never issued.
            test_api.assert_error(
                requests.get(url + '/instances', timeout=test_api.TIMEOUT,
                             headers={'X-Auth-Token': 'gAAAA-not-a-token'}),
                401, errors.AUTH_UNAUTHORIZED)
