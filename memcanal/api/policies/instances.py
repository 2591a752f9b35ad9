"""Policies of /instances: a project reads its own VMs, an admin all.

The target of every check carries the ``project_id`` of the instance
concerned (for a list, the caller's own project).
"""

from oslo_policy import policy

from memcanal.api.policies import base

PREFIX = 'memcanal:instances:%s'
LIST = PREFIX % 'list'
LIST_ALL_PROJECTS = PREFIX % 'list:all_projects'
SHOW = PREFIX % 'show'
REPORTS_LIST = PREFIX % 'reports:list'
UPDATE = PREFIX % 'update'

rules = [
    policy.DocumentedRuleDefault(
        name=LIST,
        check_str=base.ADMIN_OR_PROJECT_READER,
        description='List instances (VMs) memcanal measures. Who passes '
                    'only this rule sees the instances of the project of '
                    'the token; see %s.' % LIST_ALL_PROJECTS,
        operations=[{'method': 'GET', 'path': '/instances'}],
        scope_types=base.SCOPE_TYPES),
    policy.DocumentedRuleDefault(
        name=LIST_ALL_PROJECTS,
        check_str=base.ADMIN,
        description='List the instances of every project, and filter them '
                    'with the project_id query parameter.',
        operations=[{'method': 'GET', 'path': '/instances'}],
        scope_types=base.SCOPE_TYPES),
    policy.DocumentedRuleDefault(
        name=SHOW,
        check_str=base.ADMIN_OR_PROJECT_READER,
        description='Show an instance with its latest report: working-set '
                    'size by estimator and miss-ratio curve by method.',
        operations=[{'method': 'GET', 'path': '/instances/{uuid}'}],
        scope_types=base.SCOPE_TYPES),
    policy.DocumentedRuleDefault(
        name=REPORTS_LIST,
        check_str=base.ADMIN_OR_PROJECT_READER,
        description='List the reports of an instance, newest first.',
        operations=[{'method': 'GET', 'path': '/instances/{uuid}/reports'}],
        scope_types=base.SCOPE_TYPES),
    policy.DocumentedRuleDefault(
        name=UPDATE,
        check_str=base.ADMIN,
        description='Change how memcanal may resize an instance: opt it '
                    'out, give it a floor or a ceiling, choose balloon or '
                    'hotplug.',
        operations=[{'method': 'PATCH', 'path': '/instances/{uuid}'}],
        scope_types=base.SCOPE_TYPES),
]


def list_rules():
    return rules
