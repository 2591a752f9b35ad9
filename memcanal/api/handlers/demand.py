"""``/demand_ratios``: what VMs measurably need over their flavor memory,
per flavor and per project (microversion 1.4).

nova's scheduler filter (memcanal.nova) scales a new VM's flavor memory
by its flavor's ratio, else its project's, to estimate the demand it
will bring to a host.
"""

from memcanal.api import microversion
from memcanal.api.policies import demand as policies
from memcanal.api import policy
from memcanal.api.schemas import demand as schemas
from memcanal.api import util
from memcanal.db import api as db_api


@util.wsgify
def show_demand_ratios(req):
    microversion.require(req, '1.4')
    context = req.environ[util.ENV_CONTEXT]
    policy.authorize(context, policies.SHOW, {})
    util.validate_query_params(req, schemas.SHOW)
    return util.json_response(dict(
        db_api.demand_ratios(context),
        percentile=db_api.DEMAND_PERCENTILE))
