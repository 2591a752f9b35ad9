"""Policy in code: the rules, their defaults, and authorize()."""

import pytest
import webob.exc

from memcanal.api import errors
from memcanal.api import policies
from memcanal.api import policy
from memcanal import context

RULES = {
    'memcanal:hosts:list': '(role:admin) or (role:service)',
    'memcanal:hosts:show': '(role:admin) or (role:service)',
    'memcanal:hosts:update': 'role:admin',
    'memcanal:demand_ratios:show': '(role:admin) or (role:service)',
    'memcanal:instances:list':
        '(role:admin) or (role:reader and project_id:%(project_id)s)',
    'memcanal:instances:list:all_projects': 'role:admin',
    'memcanal:instances:show':
        '(role:admin) or (role:reader and project_id:%(project_id)s)',
    'memcanal:instances:reports:list':
        '(role:admin) or (role:reader and project_id:%(project_id)s)',
    'memcanal:instances:update': 'role:admin',
    'memcanal:decisions:list': 'role:admin',
    'memcanal:decisions:show': 'role:admin',
    'memcanal:decisions:approve': 'role:admin',
    'memcanal:decisions:reject': 'role:admin',
    'memcanal:decisions:rollback': 'role:admin',
    'memcanal:memory_servers:list': 'role:admin',
    'memcanal:memory_servers:update': 'role:admin',
}


def test_rules_and_defaults():
    rules = policies.list_rules()
    assert {r.name: r.check_str for r in rules} == RULES
    for rule in rules:
        assert rule.scope_types == ['project']
        assert rule.description
        assert rule.operations


@pytest.fixture
def enforcer(conf):
    return policy.init(conf)


def ctx(roles, project_id='p1', **kwargs):
    return context.RequestContext(user_id='u', project_id=project_id,
                                  roles=roles, **kwargs)


@pytest.mark.parametrize('roles, target_project, allowed', [
    (['reader'], 'p1', True),
    (['reader'], 'p2', False),
    (['member'], 'p1', False),
    (['admin'], 'p2', True),
    ([], 'p1', False),
])
def test_instance_show(enforcer, roles, target_project, allowed):
    assert policy.authorize(ctx(roles), 'memcanal:instances:show',
                            {'project_id': target_project},
                            do_raise=False) is allowed


def test_denied_raises_403_with_code(enforcer):
    with pytest.raises(webob.exc.HTTPForbidden) as raised:
        policy.authorize(ctx(['reader']), 'memcanal:hosts:list', {})
    assert raised.value.comment == errors.POLICY_DENIED
    assert 'memcanal:hosts:list' in str(raised.value.detail)


def test_system_scope_is_denied(enforcer):
    system_admin = ctx(['admin'], project_id=None, system_scope='all')
    assert not policy.authorize(system_admin, 'memcanal:hosts:list', {},
                                do_raise=False)


def test_policy_file_overrides_default(conf, tmp_path):
    policy_file = tmp_path / 'policy.yaml'
    policy_file.write_text('"memcanal:hosts:list": "role:reader"\n')
    conf.set_override('policy_file', str(policy_file), 'oslo_policy')
    policy.init(conf)
    assert policy.authorize(ctx(['reader']), 'memcanal:hosts:list', {})
    assert not policy.authorize(ctx(['reader']), 'memcanal:hosts:show', {},
                                do_raise=False)


def test_get_enforcer_registers_every_rule(conf):
    enforcer = policy.get_enforcer()
    assert set(enforcer.registered_rules) == set(RULES)
