"""Authorization with oslo.policy against the rules in ``policies``.

One enforcer per process, made by ``init(conf)`` when the app is built.
It reads overrides from ``[oslo_policy] policy_file`` (policy.yaml next to
the config file by default) and reloads it when it changes.
"""

from oslo_config import cfg
from oslo_policy import policy
import webob.exc

from memcanal.api import errors
from memcanal.api import policies

_ENFORCER = None


def init(conf):
    """(Re)create the enforcer on ``conf``, with every rule registered."""
    global _ENFORCER
    enforcer = policy.Enforcer(conf)
    enforcer.register_defaults(policies.list_rules())
    enforcer.load_rules()
    _ENFORCER = enforcer
    return enforcer


def reset():
    """Forget the enforcer; tests call this between apps."""
    global _ENFORCER
    _ENFORCER = None


def get_enforcer():
    """The ``oslo.policy.enforcer`` entry point, for the oslopolicy tools.

    They pass their own command line to oslo.config, so parse no
    arguments here, only memcanal's config files.
    """
    cfg.CONF([], project='memcanal')
    return init(cfg.CONF)


def _denied(action):
    return webob.exc.HTTPForbidden(
        'Policy does not allow %s to be performed.' % action,
        comment=errors.POLICY_DENIED)


def authorize(context, action, target, do_raise=True):
    """Whether ``context`` may perform ``action`` on ``target``.

    ``target`` is a dict, e.g. ``{'project_id': ...}`` of the resource.
    When denied, raise a 403 ``memcanal.policy.denied`` (or, without
    ``do_raise``, return False). A token of the wrong scope is denied
    the same way.
    """
    enforcer = _ENFORCER or init(cfg.CONF)
    # Without do_raise, oslo.policy answers a token of the wrong scope
    # with False too, rather than raising InvalidScope.
    allowed = enforcer.authorize(action, target, context)
    if not allowed and do_raise:
        raise _denied(action)
    return bool(allowed)
