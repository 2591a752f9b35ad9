"""memcanal's tempest plugin run by ``tempest run``, as CI runs it on a
cloud: against the seeded cloud of cloud.py (memcanal behind a real
keystone, in keystone's catalog as type ``memcanal``).

tempest creates its own projects and users (dynamic credentials) as
keystone's bootstrap admin, so the plugin's admin and project member are
real keystone users with fresh tokens. Every plugin test must pass: the
cloud offers each test what it needs (instances with reports, decisions
in every state a transition wants), so a skip is a failure here.
"""

import io
import os
import subprocess
import sys

import pytest
import subunit
import testtools

from memcanal.tests.functional import cloud as seeded
from memcanal.tests.functional import services

TEMPEST = os.path.join(os.path.dirname(sys.executable), 'tempest')
STESTR = os.path.join(os.path.dirname(sys.executable), 'stestr')
REGEX = r'^memcanal_tempest_plugin\.'
# The checkout's plugin, even where the venv's editable install predates
# it (its import finder maps only the packages that existed then).
TOP = os.path.join(os.path.dirname(__file__), '..', '..', '..')
ENV = dict(os.environ, PYTHONPATH=os.path.abspath(TOP))
# Every service tempest knows but memcanal's, so no other plugin's or
# tempest's own tests, nor dynamic credentials' networks, are attempted.
OTHER_SERVICES = ('cinder', 'glance', 'neutron', 'nova', 'swift',
                  'horizon')
TEMPEST_CONF = """\
[DEFAULT]
log_file = tempest.log

[auth]
use_dynamic_credentials = True
create_isolated_networks = False
admin_username = {cloud.username}
admin_password = {cloud.password}
admin_project_name = {cloud.project_name}
admin_domain_name = {cloud.user_domain_name}

[identity]
auth_version = v3
uri_v3 = {cloud.keystone_url}

[identity-feature-enabled]
api_v2 = False

[service_available]
memcanal = True
{others}

[memcanal]
# The cloud's decisions and instances are the fixture's, seeded for this.
change_existing_resources = True
"""


@pytest.fixture(scope='module')
def cloud(keystone_url, tmp_path_factory):
    with seeded.seeded_cloud(keystone_url,
                             tmp_path_factory.mktemp('cloud')) as running:
        yield running


@pytest.fixture(scope='module')
def workspace(cloud, tmp_path_factory):
    """A tempest workspace whose tempest.conf points at the cloud; its
    registry of workspaces stays in tmp, not in ~/.tempest."""
    if not os.path.exists(TEMPEST):
        services.missing('tempest is not installed next to %s'
                         % sys.executable)
    top = tmp_path_factory.mktemp('tempest')
    path = top / 'workspace'
    subprocess.run([TEMPEST, 'init', '--workspace-path',
                    str(top / 'workspace.yaml'), str(path)], check=True,
                   capture_output=True, env=ENV)
    (path / 'etc' / 'tempest.conf').write_text(TEMPEST_CONF.format(
        cloud=cloud, others='\n'.join('%s = False' % name
                                      for name in OTHER_SERVICES)))
    return path


def results(workspace):
    """{test id: status} of the workspace's last run, from its subunit
    stream (``stestr last --subunit``). A class whose setup failed or
    skipped is one entry, ``setUpClass (<class>)``."""
    stream = subprocess.run([STESTR, 'last', '--subunit'], cwd=workspace,
                            check=True, capture_output=True).stdout
    statuses = {}

    def record(test):
        statuses[test['id']] = test['status']

    summary = testtools.StreamToDict(record)
    summary.startTestRun()
    subunit.ByteStreamToStreamResult(io.BytesIO(stream)).run(summary)
    summary.stopTestRun()
    return statuses


def test_plugin_passes_against_the_cloud(workspace):
    # Serial: keystone on SQLite refuses concurrent writes ("database is
    # locked") when two workers make and delete their users at once.
    # The timeout only keeps a hung run from hanging CI (it takes ~1 min).
    run = subprocess.run([TEMPEST, 'run', '--regex', REGEX, '--serial',
                          '--config-file',
                          str(workspace / 'etc' / 'tempest.conf')],
                         cwd=workspace, env=ENV, capture_output=True,
                         text=True, timeout=900)
    output = run.stdout + run.stderr
    assert run.returncode == 0, output
    statuses = results(workspace)
    not_passed = {test: status for test, status in statuses.items()
                  if status != 'success'}
    assert not_passed == {}, output
    modules = {test.split('.')[3] for test in statuses
               if test.startswith('memcanal_tempest_plugin.')}
    assert modules == {'test_decisions', 'test_demand', 'test_hosts',
                       'test_instances', 'test_memory_servers', 'test_rbac',
                       'test_root'}
