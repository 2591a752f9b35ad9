"""schemathesis against the API reference and the real WSGI app.

The app is ``deploy.loadapp``'s, with noauth2 (token ``admin``), on a
SQLite file seeded with tests/unit/api/full_cloud.py's cloud: hosts,
instances with reports, decisions in several states and a memory server
lending to a VM. schemathesis builds
requests from the reference at the oldest and the newest microversion
(memcanal.api.openapi.build(version), which describes exactly that
version), valid and invalid ones, and checks that none is answered with
a 5xx, that every response matches its documented status, content type,
headers and schema, that valid requests are accepted and invalid ones
refused (so the query and body schemas the reference names are the ones
the handlers apply). Path uuids are drawn from the seeded rows as well as
generated, so requests reach real hosts, instances and decisions.

Bounded (MAX_EXAMPLES per operation and phase) and derandomized: the
same requests on every run.
"""

import hypothesis
from hypothesis import strategies as st
import pytest
import schemathesis
from schemathesis import checks
from schemathesis.specs.openapi import checks as openapi_checks

from memcanal.api import deploy
from memcanal.api import microversion
from memcanal.api import openapi
from memcanal.tests import fixtures as memcanal_fixtures
from memcanal.tests.unit.api import full_cloud
from memcanal.tests.unit.api import data

MAX_EXAMPLES = 50
CHECKS = [checks.not_a_server_error,
          openapi_checks.status_code_conformance,
          openapi_checks.content_type_conformance,
          openapi_checks.response_headers_conformance,
          openapi_checks.response_schema_conformance,
          openapi_checks.positive_data_acceptance,
          openapi_checks.negative_data_rejection]
# A floor_bytes above the ceiling_bytes, given or stored, is refused: a
# rule between values JSON Schema cannot state.
EXCLUDED = {('PATCH', '/instances/{uuid}'): [
    openapi_checks.positive_data_acceptance]}
ADMIN = {'X-Auth-Token': 'admin'}
# The seeded rows, by the first segment of the path naming them.
SEEDED = {}


def _schema(version):
    schema = schemathesis.openapi.from_dict(openapi.build(version))
    schema.config.generation.update(max_examples=MAX_EXAMPLES,
                                    deterministic=True)

    @schema.hook
    def before_generate_path_parameters(context, strategy):
        """Also the uuids of seeded rows: generated ones name nothing.
        Deferred: the rows are seeded after the tests are collected."""
        if '{uuid}' not in context.operation.path:
            return strategy
        collection = context.operation.path.split('/')[1]
        return st.one_of(strategy, st.deferred(lambda: st.builds(
            lambda uuid: {'uuid': uuid},
            st.sampled_from(SEEDED[collection]))))

    @schema.hook
    def filter_query(context, query):
        """No raw ';': the WSGI test client leaves it unquoted, and webob
        splits a query string at it as at '&' (HTML forms once did);
        clients (requests, keystoneauth) send it as %3B."""
        return not any(';' in str(text) for item in (query or {}).items()
                       for text in item)

    return schema


OLDEST = _schema(microversion.min_version_string())
NEWEST = _schema(microversion.max_version_string())


@pytest.fixture(scope='module')
def app(tmp_path_factory):
    url = 'sqlite:///%s' % (tmp_path_factory.mktemp('schemathesis')
                            / 'memcanal.sqlite')
    with data.using(memcanal_fixtures.ConfFixture('noauth2')) as fixture, \
            data.using(memcanal_fixtures.Database(url, migrate=True)):
        fixture.conf.set_override('connection', url, 'database')
        SEEDED.update(full_cloud.seed())
        yield deploy.loadapp(fixture.conf)


SETTINGS = hypothesis.settings(
    deadline=None, derandomize=True, database=None,
    suppress_health_check=list(hypothesis.HealthCheck))


def call_and_validate(case, app, version):
    """As the admin at ``version``, whatever microversion header the
    case made up (schemathesis sees the edit and judges the case anew):
    one not naming memcanal is ignored, the request then being at the
    oldest version, and bad ones are test_root.py's."""
    case.headers = dict(case.headers or {}, **{
        microversion.HEADER: '%s %s' % (microversion.SERVICE_TYPE, version)})
    case.call_and_validate(
        app=app, headers=ADMIN, checks=CHECKS,
        excluded_checks=EXCLUDED.get((case.method, case.path), []))


@OLDEST.parametrize()
@SETTINGS
def test_oldest_microversion(case, app):
    call_and_validate(case, app, microversion.min_version_string())


@NEWEST.parametrize()
@SETTINGS
def test_newest_microversion(case, app):
    call_and_validate(case, app, microversion.max_version_string())
