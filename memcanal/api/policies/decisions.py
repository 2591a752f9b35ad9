"""Policies of /decisions: the operator's. A decision resizes VMs of
many projects on a host, so only an admin sees or changes one."""

from oslo_policy import policy

from memcanal.api.policies import base

PREFIX = 'memcanal:decisions:%s'
LIST = PREFIX % 'list'
SHOW = PREFIX % 'show'
APPROVE = PREFIX % 'approve'
REJECT = PREFIX % 'reject'
ROLLBACK = PREFIX % 'rollback'


def _rule(name, description, method, path):
    return policy.DocumentedRuleDefault(
        name=name, check_str=base.ADMIN, description=description,
        operations=[{'method': method, 'path': path}],
        scope_types=base.SCOPE_TYPES)


rules = [
    _rule(LIST, 'List the optimizer\'s decisions, newest first.', 'GET',
          '/decisions'),
    _rule(SHOW, 'Show a decision with its inputs, actions and history.',
          'GET', '/decisions/{uuid}'),
    _rule(APPROVE, 'Approve a recommended decision: its targets are then '
          'applied.', 'POST', '/decisions/{uuid}/approve'),
    _rule(REJECT, 'Reject a recommended decision.', 'POST',
          '/decisions/{uuid}/reject'),
    _rule(ROLLBACK, 'Restore every VM a decision changed to its previous '
          'target.', 'POST', '/decisions/{uuid}/rollback'),
]


def list_rules():
    return rules
