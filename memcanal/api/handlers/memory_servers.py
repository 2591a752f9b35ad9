"""``/memory_servers``: the memory servers hosts run, what each lends and
to whom (microversion 1.5), and which of them an operator enabled
(1.6). Admin only.

Memory pooling (memcanal.service.pooling) pages cold memory of VMs on
hosts short of memory out to these servers; each lease is one VM's paged
memory on one server. A host's agent registers its server disabled: it
lends nothing until an operator enables it here.
"""

import webob.exc

from memcanal.api import errors
from memcanal.api.handlers import views
from memcanal.api import microversion
from memcanal.api.policies import memory_servers as policies
from memcanal.api import policy
from memcanal.api.schemas import common
from memcanal.api.schemas import memory_servers as schemas
from memcanal.api import util
from memcanal.db import pooling as pooling_db
from memcanal import exception


def _view(req, server):
    body = views.memory_server(server)
    if microversion.is_supported(req, '1.6'):
        body.update(views.memory_server_identity(server))
    return body


@util.wsgify
def list_memory_servers(req):
    """All memory servers, by host name; not paginated (one per host)."""
    microversion.require(req, '1.5')
    context = req.environ[util.ENV_CONTEXT]
    policy.authorize(context, policies.LIST, {})
    util.validate_query_params(req, schemas.LIST)
    return util.json_response({'memory_servers': [
        _view(req, server)
        for server in pooling_db.list_memory_servers(context)]})


@util.wsgify
def update_memory_server(req):
    """Enable or disable a memory server (microversion 1.6)."""
    microversion.require(req, '1.6')
    context = req.environ[util.ENV_CONTEXT]
    policy.authorize(context, policies.UPDATE, {})
    uuid = util.path_item(req, 'uuid')
    values = util.extract_json(req, schemas.UPDATE)
    try:
        if not common.is_uuid(uuid):
            raise exception.MemoryServerNotFound(uuid=uuid)
        server = pooling_db.set_enabled(context, uuid, values['enabled'])
    except exception.MemoryServerNotFound as exc:
        raise webob.exc.HTTPNotFound(
            str(exc), comment=errors.MEMORY_SERVER_NOT_FOUND)
    return util.json_response(_view(req, server))
