"""``/decisions``: what the optimizer decided, and the operator's say.

A decision lists new memory targets for VMs of one host. In recommend
mode it waits for ``approve`` or ``reject``; an applied (or failed) one
can be rolled back. These handlers only move its state, recording who
asked; the service's periodic job sends the resulting actions to the
agent. Admin only. Since microversion 1.1.
"""

import webob.exc

from memcanal.api import errors
from memcanal.api.handlers import views
from memcanal.api import microversion
from memcanal.api.policies import decisions as policies
from memcanal.api import policy
from memcanal.api.schemas import common
from memcanal.api.schemas import decisions as schemas
from memcanal.api import util
from memcanal.db import decisions as decisions_db
from memcanal.db import transitions
from memcanal import exception
from memcanal.policy import guardrails

MIB = 2 ** 20


def _not_found(detail):
    return webob.exc.HTTPNotFound(detail, comment=errors.DECISION_NOT_FOUND)


def _uuid(req):
    uuid = util.path_item(req, 'uuid')
    if not common.is_uuid(uuid):
        raise _not_found('%s is not a decision uuid.' % uuid)
    return uuid


@util.wsgify
def list_decisions(req):
    """Decisions newest first, a page of ``limit`` after ``marker``."""
    microversion.require(req, '1.1')
    context = req.environ[util.ENV_CONTEXT]
    policy.authorize(context, policies.LIST, {})
    params = util.validate_query_params(req, schemas.list_query(
        req.environ[util.ENV_CONF].api.max_limit))
    limit = params.get('limit', req.environ[util.ENV_CONF].api.max_limit)
    try:
        found = decisions_db.list_decisions(
            context, host_uuid=params.get('host'), state=params.get('state'),
            limit=limit, marker=params.get('marker'))
    except exception.MarkerNotFound as exc:
        raise webob.exc.HTTPNotFound(str(exc),
                                     comment=errors.MARKER_NOT_FOUND)
    return util.json_response({
        'decisions': [_view(req, d, views.decision) for d in found],
        'links': util.page_links(req, found, limit,
                                 found[-1]['uuid'] if found else None),
    })


def _view(req, decision, view):
    """The decision as ``view`` renders it; from 1.4 with the other host
    it concerns (a migration's destination; null for other kinds)."""
    body = view(decision)
    if microversion.is_supported(req, '1.4'):
        body['peer_host_uuid'] = decision['peer_host_uuid']
    if 'actions' in body and microversion.is_supported(req, '1.9'):
        for action in body['actions']:
            action.update(views.action_reached(action))
    return body


@util.wsgify
def get_decision(req):
    microversion.require(req, '1.1')
    context = req.environ[util.ENV_CONTEXT]
    policy.authorize(context, policies.SHOW, {})
    uuid = _uuid(req)
    util.validate_query_params(req, schemas.SHOW)
    try:
        found = decisions_db.get_decision(context, uuid)
    except exception.DecisionNotFound as exc:
        raise _not_found(str(exc))
    return util.json_response(_view(req, found, views.decision_detail))


def _conflict(req, exc, code, **names):
    """A 409 whose error also names the decision in the way."""
    return util.error_response(
        req.environ, webob.exc.HTTPConflict(str(exc)), code=code, **names)


def _transition(request, rule):
    @util.wsgify
    def handler(req):
        microversion.require(req, '1.1')
        context = req.environ[util.ENV_CONTEXT]
        policy.authorize(context, rule, {})
        uuid = _uuid(req)
        body = util.extract_json(req, schemas.TRANSITION) or {}
        conf = req.environ[util.ENV_CONF]
        try:
            found = transitions.request_transition(
                context, uuid, request, reason=body.get('reason'),
                rails=guardrails.Rails(
                    kernel_bytes=conf.optimizer.kernel_mb * MIB))
        except exception.DecisionNotFound as exc:
            raise _not_found(str(exc))
        except exception.DecisionStateConflict as exc:
            raise webob.exc.HTTPConflict(
                str(exc), comment=errors.DECISION_STATE_CONFLICT)
        except exception.DecisionSuperseded as exc:
            return _conflict(req, exc, errors.DECISION_SUPERSEDED,
                             newer_decision=exc.kwargs['newer'])
        except exception.HostBusy as exc:
            return _conflict(req, exc, errors.DECISION_HOST_BUSY,
                             busy_decision=exc.kwargs['busy'])
        return util.json_response(_view(req, found, views.decision_detail))
    handler.__doc__ = 'POST /decisions/{uuid}/%s' % request
    return handler


approve = _transition('approve', policies.APPROVE)
reject = _transition('reject', policies.REJECT)
rollback = _transition('rollback', policies.ROLLBACK)
