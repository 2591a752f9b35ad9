"""``/hosts``: the compute hosts that run a memcanal agent, and which of
them an operator admitted to memory pooling (microversion 1.10). Admin
only (listing: the service role too).

A host registers on first use, with a key of its own: its name is no
operator's word. It neither borrows nor lends memory until an operator
admits it here (memcanal.db.pooling.set_admitted).
"""

import webob.exc

from memcanal.api import errors
from memcanal.api.handlers import views
from memcanal.api import microversion
from memcanal.api.policies import hosts as policies
from memcanal.api import policy
from memcanal.api.schemas import common
from memcanal.api.schemas import hosts as schemas
from memcanal.api import util
from memcanal.db import api as db_api
from memcanal.db import pooling as pooling_db
from memcanal import exception


def _not_found(detail):
    return webob.exc.HTTPNotFound(detail, comment=errors.HOST_NOT_FOUND)


def _view(req, host):
    """The host; from 1.3 with the report interval its state, derived
    from its last heartbeat, is judged by; from 1.4 with its zone, the
    allocation ratio memcanal set and its measured demand; from 1.5 with
    its memory map (resident, lent, borrowed); from 1.7 with its
    hypervisor type and whether nova manages it; from 1.8 with its
    demand's 95 % interval; from 1.10 with whether it is admitted to
    memory pooling."""
    body = views.host(host)
    if microversion.is_supported(req, '1.3'):
        body['report_interval'] = host['report_interval']
    if microversion.is_supported(req, '1.4'):
        body.update(views.host_demand(host))
    if microversion.is_supported(req, '1.5'):
        body.update(views.host_pooling(host))
    if microversion.is_supported(req, '1.7'):
        body.update(views.host_hypervisor(host))
    if microversion.is_supported(req, '1.8'):
        body.update(views.host_demand_bounds(host))
    if microversion.is_supported(req, '1.10'):
        body.update(views.host_admission(host))
    return body


@util.wsgify
def list_hosts(req):
    """All hosts, by name; not paginated, a cloud has few enough."""
    context = req.environ[util.ENV_CONTEXT]
    policy.authorize(context, policies.LIST, {})
    util.validate_query_params(req, schemas.LIST)
    return util.json_response(
        {'hosts': [_view(req, h) for h in db_api.list_hosts(context)]})


@util.wsgify
def get_host(req):
    context = req.environ[util.ENV_CONTEXT]
    policy.authorize(context, policies.SHOW, {})
    uuid = util.path_item(req, 'uuid')
    if not common.is_uuid(uuid):
        raise _not_found('%s is not a host uuid.' % uuid)
    try:
        host = db_api.get_host(context, uuid)
    except exception.HostNotFound as exc:
        raise _not_found(str(exc))
    util.validate_query_params(req, schemas.SHOW)
    return util.json_response(_view(req, host))


@util.wsgify
def update_host(req):
    """Admit a host to memory pooling, or stop it (microversion 1.10)."""
    microversion.require(req, '1.10')
    context = req.environ[util.ENV_CONTEXT]
    policy.authorize(context, policies.UPDATE, {})
    uuid = util.path_item(req, 'uuid')
    values = util.extract_json(req, schemas.UPDATE)
    if not common.is_uuid(uuid):
        raise _not_found('%s is not a host uuid.' % uuid)
    try:
        pooling_db.set_admitted(context, uuid, values['pooling_admitted'])
        host = db_api.get_host(context, uuid)
    except exception.HostNotFound as exc:
        raise _not_found(str(exc))
    return util.json_response(_view(req, host))
