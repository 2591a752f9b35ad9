"""``/memory_servers``: the memory servers hosts run, what each lends and
to whom (microversion 1.5). Admin only.

Memory pooling (memcanal.service.pooling) pages cold memory of VMs on
hosts short of memory out to these servers; each lease is one VM's paged
memory on one server.
"""

from memcanal.api.handlers import views
from memcanal.api import microversion
from memcanal.api.policies import memory_servers as policies
from memcanal.api import policy
from memcanal.api.schemas import memory_servers as schemas
from memcanal.api import util
from memcanal.db import pooling as pooling_db


@util.wsgify
def list_memory_servers(req):
    """All memory servers, by host name; not paginated (one per host)."""
    microversion.require(req, '1.5')
    context = req.environ[util.ENV_CONTEXT]
    policy.authorize(context, policies.LIST, {})
    util.validate_query_params(req, schemas.LIST)
    return util.json_response({'memory_servers': [
        views.memory_server(server)
        for server in pooling_db.list_memory_servers(context)]})
