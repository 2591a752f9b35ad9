"""The personas memcanal's default policies are written with.

New-style (secure RBAC) defaults: project-scoped tokens, with keystone's
default roles admin, member and reader (member implies reader and admin
implies member when keystone issues the token).

- ADMIN sees the whole cloud: hosts are infrastructure, and WSS or
  miss-ratio curves of every VM are the operator's business.
- PROJECT_READER sees the VMs of its own project, and their reports.
- SERVICE (keystone's service role) is nova's scheduler, which reads
  hosts' measured demand and the demand ratios to place VMs.
"""

ADMIN = 'role:admin'
PROJECT_READER = 'role:reader and project_id:%(project_id)s'
ADMIN_OR_PROJECT_READER = '(%s) or (%s)' % (ADMIN, PROJECT_READER)
# nova's scheduler reads hosts' measured demand as a service user.
SERVICE = 'role:service'
ADMIN_OR_SERVICE = '(%s) or (%s)' % (ADMIN, SERVICE)

# Every rule is checked with a project-scoped token; a system- or
# domain-scoped token is refused by oslo.policy before the check string.
SCOPE_TYPES = ['project']

rules = []


def list_rules():
    return rules
