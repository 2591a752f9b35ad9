"""``/instances``: the VMs memcanal measures.

A project reader sees its own project's instances; an admin sees all.
Showing an instance of another project is refused (403) rather than
hidden, as the policy says.
"""

import webob.exc

from memcanal.api import errors
from memcanal.api.handlers import views
from memcanal.api import microversion
from memcanal.api.policies import instances as policies
from memcanal.api import policy
from memcanal.api.schemas import common
from memcanal.api.schemas import instances as schemas
from memcanal.api import util
from memcanal.db import api as db_api
from memcanal import exception


def _not_found(detail):
    return webob.exc.HTTPNotFound(detail, comment=errors.INSTANCE_NOT_FOUND)


def load_instance(req):
    """The instance the path names, with its latest report, or 404.

    A string that cannot be a uuid is a 404 too: it names no instance.
    """
    uuid = util.path_item(req, 'uuid')
    if not common.is_uuid(uuid):
        raise _not_found('%s is not an instance uuid.' % uuid)
    try:
        return db_api.get_instance(req.environ[util.ENV_CONTEXT], uuid)
    except exception.InstanceNotFound as exc:
        raise _not_found(str(exc))


def _view(req, instance):
    body = views.instance(instance)
    if microversion.is_supported(req, '1.1'):
        body.update(views.instance_settings(instance))
    if microversion.is_supported(req, '1.3'):
        body.update(views.instance_presence(instance))
    if microversion.is_supported(req, '1.4'):
        body.update(flavor=instance['flavor'],
                    wss_bytes=instance['wss_bytes'])
    if microversion.is_supported(req, '1.5'):
        body.update(views.instance_paging(instance))
    if microversion.is_supported(req, '1.8'):
        body.update(views.instance_wss_bounds(instance))
    if microversion.is_supported(req, '1.9'):
        body.update(views.instance_reached(instance))
    return body


def report_view(req, report):
    """A report as listed; its intervals from 1.8."""
    body = views.report(report)
    if microversion.is_supported(req, '1.8'):
        body.update(views.report_intervals(report))
    return body


def _latest_report_view(req, report):
    body = report_view(req, report)
    if microversion.is_supported(req, '1.2'):
        body['logs'] = views.report_logs(report)
    return body


def _listed_project(context, requested):
    """The project to filter on: None for all, when policy allows."""
    if policy.authorize(context, policies.LIST_ALL_PROJECTS,
                        {'project_id': context.project_id}, do_raise=False):
        return requested
    if context.project_id is None or requested not in (None,
                                                       context.project_id):
        # Listing someone else's project would need the all_projects
        # rule; a token without a project has no own instances either.
        raise webob.exc.HTTPForbidden(
            'Policy does not allow %s to be performed.'
            % policies.LIST_ALL_PROJECTS, comment=errors.POLICY_DENIED)
    return context.project_id


def _check_marker(context, marker, project_id):
    """404 unless ``marker`` is an instance the caller could list.

    Without this, a mistyped marker silently gives some other page.
    """
    try:
        instance = db_api.get_instance(context, marker)
    except exception.InstanceNotFound:
        instance = None
    if instance is None or project_id not in (None, instance['project_id']):
        raise webob.exc.HTTPNotFound(
            'Marker %s is not an instance uuid.' % marker,
            comment=errors.MARKER_NOT_FOUND)


@util.wsgify
def list_instances(req):
    """Instances ordered by uuid, a page of ``limit`` after ``marker``."""
    context = req.environ[util.ENV_CONTEXT]
    max_limit = req.environ[util.ENV_CONF].api.max_limit
    policy.authorize(context, policies.LIST,
                     {'project_id': context.project_id})
    params = util.validate_query_params(req, schemas.list_query(
        max_limit, with_deleted=microversion.is_supported(req, '1.3')))
    project_id = _listed_project(context, params.get('project_id'))
    limit = params.get('limit', max_limit)
    marker = params.get('marker')
    if marker is not None:
        _check_marker(context, marker, project_id)
    instances = db_api.list_instances(
        context, project_id=project_id, host_uuid=params.get('host'),
        limit=limit, marker=marker,
        deleted=params.get('deleted') == 'true')
    return util.json_response({
        'instances': [_view(req, i) for i in instances],
        'links': util.page_links(
            req, instances, limit, instances[-1]['uuid'] if instances
            else None),
    })


@util.wsgify
def get_instance(req):
    """One instance with ``latest_report`` (null before its first)."""
    context = req.environ[util.ENV_CONTEXT]
    instance = load_instance(req)
    policy.authorize(context, policies.SHOW,
                     {'project_id': instance['project_id']})
    util.validate_query_params(req, schemas.SHOW)
    body = _view(req, instance)
    latest = instance['latest_report']
    body['latest_report'] = (_latest_report_view(req, latest) if latest
                             else None)
    return util.json_response(body)


@util.wsgify
def update_instance(req):
    """Change how memcanal may resize an instance (microversion 1.1)."""
    microversion.require(req, '1.1')
    context = req.environ[util.ENV_CONTEXT]
    instance = load_instance(req)
    policy.authorize(context, policies.UPDATE,
                     {'project_id': instance['project_id']})
    values = util.extract_json(req, schemas.UPDATE)
    floor = values.get('floor_bytes', instance['floor_bytes'])
    ceiling = values.get('ceiling_bytes', instance['ceiling_bytes'])
    if floor is not None and ceiling is not None and floor > ceiling:
        raise webob.exc.HTTPBadRequest(
            'floor_bytes (%d) is above ceiling_bytes (%d).' % (floor,
                                                               ceiling),
            comment=errors.BODY_INVALID)
    updated = db_api.update_instance_settings(context, instance['uuid'],
                                              values)
    return util.json_response(_view(req, updated))
