"""``/instances/{uuid}/reports``: what the agent reported, newest first."""

import webob.exc

from memcanal.api import errors
from memcanal.api.handlers import instances
from memcanal.api.policies import instances as policies
from memcanal.api import policy
from memcanal.api.schemas import reports as schemas
from memcanal.api import util
from memcanal.db import api as db_api
from memcanal import exception


def _check_marker(context, instance_uuid, marker):
    """404 unless ``marker`` is the id of one of this instance's reports.

    The newest report with an id at most ``marker`` is the marker itself
    exactly when the marker exists; one indexed query, no new DB API.
    """
    found = db_api.list_instance_reports(context, instance_uuid, limit=1,
                                         marker=marker + 1)
    if not found or found[0]['id'] != marker:
        raise webob.exc.HTTPNotFound(
            'Marker %d is not a report of instance %s.' % (
                marker, instance_uuid), comment=errors.MARKER_NOT_FOUND)


@util.wsgify
def list_reports(req):
    """A page of ``limit`` reports older than the report ``marker``."""
    context = req.environ[util.ENV_CONTEXT]
    max_limit = req.environ[util.ENV_CONF].api.max_limit
    instance = instances.load_instance(req)
    policy.authorize(context, policies.REPORTS_LIST,
                     {'project_id': instance['project_id']})
    params = util.validate_query_params(req, schemas.list_query(max_limit))
    limit = params.get('limit', max_limit)
    marker = params.get('marker')
    try:
        if marker is not None:
            _check_marker(context, instance['uuid'], marker)
        reports = db_api.list_instance_reports(
            context, instance['uuid'], limit=limit, marker=marker)
    except exception.InstanceNotFound as exc:
        raise webob.exc.HTTPNotFound(str(exc),
                                     comment=errors.INSTANCE_NOT_FOUND)
    return util.json_response({
        'reports': [instances.report_view(req, r) for r in reports],
        'links': util.page_links(req, reports,
                                 limit, reports[-1]['id'] if reports
                                 else None),
    })
