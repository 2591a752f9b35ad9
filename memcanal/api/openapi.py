"""The REST API's OpenAPI 3.1 reference, built from the code that serves it.

    python -m memcanal.api.openapi > doc/api-ref/openapi.json

Paths and methods are handler.ROUTE_DECLARATIONS'; query parameters and
request bodies are the jsonschema the handlers validate against
(memcanal.api.schemas); response bodies memcanal.api.schemas.responses;
error codes memcanal.api.errors; versions memcanal.api.microversion.
OPERATIONS adds, per handler, only what the code cannot say without
running it: which schemas it uses and the microversion it appeared in.
The tests check those against the running API.

Built without a version, the reference covers every microversion: what
a later one added says so ("Since microversion X.Y", and
``x-memcanal-min-version``). Built for one version it describes exactly
that version; the schemathesis tests run against those.

Routes under NON_JSON_PATHS (the dashboard: pages for a browser; the
metrics: Prometheus's text format, doc/monitoring.md) are left out; this
is the reference of the JSON API.
"""

import dataclasses
import json
import re
import sys
import typing

import microversion_parse
from oslo_middleware import request_id as request_id_middleware

from memcanal.api import handler
from memcanal.api.handlers import decisions
from memcanal.api.handlers import demand
from memcanal.api.handlers import hosts
from memcanal.api.handlers import instances
from memcanal.api.handlers import memory_servers
from memcanal.api.handlers import reports
from memcanal.api.handlers import root
from memcanal.api import microversion
from memcanal.api.schemas import common
from memcanal.api.schemas import decisions as decision_schemas
from memcanal.api.schemas import demand as demand_schemas
from memcanal.api.schemas import hosts as host_schemas
from memcanal.api.schemas import instances as instance_schemas
from memcanal.api.schemas import memory_servers as memory_server_schemas
from memcanal.api.schemas import reports as report_schemas
from memcanal.api.schemas import responses
from memcanal.conf import api as api_conf

REGENERATE = 'python -m memcanal.api.openapi > doc/api-ref/openapi.json'
NON_JSON_PATHS = ('/dashboard', '/metrics')
TOKEN_HEADER = 'X-Auth-Token'
REQUEST_ID_HEADER = request_id_middleware.HTTP_RESP_HEADER_REQUEST_ID
DEFAULT_MAX_LIMIT = next(option.default for option in api_conf.api_opts
                         if option.name == 'max_limit')
_PATH_VARIABLE = re.compile(r'\{(\w+)\}')


class UndescribedRoute(Exception):
    """A JSON route without an entry in OPERATIONS."""


@dataclasses.dataclass(frozen=True)
class Operation:
    """What the reference says of one handler.

    ``query`` gives the query string's schema for ([api] max_limit,
    microversion 'X.Y'), as the handler builds it (None: the handler
    reads no query string); ``body`` is the request body's schema,
    optional when it admits null.
    """

    summary: str
    response: str  # a name in responses.COMPONENTS
    query: typing.Callable[[int, str], dict] | None = None
    body: dict | None = None
    min_version: str = microversion.min_version_string()
    authenticated: bool = True
    # 409 when the resource's state does not allow the request.
    conflicts: bool = False


def _fixed(schema):
    return lambda max_limit, version: schema


def _paged(list_query):
    return lambda max_limit, version: list_query(max_limit)


def _supports(version, min_version):
    return (microversion_parse.parse_version_string(version)
            >= microversion_parse.parse_version_string(min_version))


OPERATIONS = {
    root.home: Operation(
        'The API versions this service speaks', 'Versions',
        authenticated=False),
    demand.show_demand_ratios: Operation(
        "VMs' measured demand over their flavor memory", 'DemandRatios',
        query=_fixed(demand_schemas.SHOW), min_version='1.4'),
    hosts.list_hosts: Operation(
        'List the hosts', 'HostList', query=_fixed(host_schemas.LIST)),
    hosts.get_host: Operation(
        'Show a host', 'Host', query=_fixed(host_schemas.SHOW)),
    hosts.update_host: Operation(
        'Admit a host to memory pooling, or stop it', 'Host',
        body=host_schemas.UPDATE, min_version='1.10'),
    instances.list_instances: Operation(
        'List instances, a page at a time', 'InstanceList',
        query=lambda max_limit, version: instance_schemas.list_query(
            max_limit, with_deleted=_supports(version, '1.3'))),
    instances.get_instance: Operation(
        'Show an instance and its latest report', 'InstanceDetail',
        query=_fixed(instance_schemas.SHOW)),
    instances.update_instance: Operation(
        'Change how memcanal may resize an instance', 'Instance',
        body=instance_schemas.UPDATE, min_version='1.1'),
    reports.list_reports: Operation(
        "List an instance's reports, newest first", 'ReportList',
        query=_paged(report_schemas.list_query)),
    decisions.list_decisions: Operation(
        'List decisions, newest first', 'DecisionList',
        query=_paged(decision_schemas.list_query), min_version='1.1'),
    decisions.get_decision: Operation(
        'Show a decision, its actions and events', 'DecisionDetail',
        query=_fixed(decision_schemas.SHOW), min_version='1.1'),
    memory_servers.list_memory_servers: Operation(
        'List the memory servers and their leases', 'MemoryServerList',
        query=_fixed(memory_server_schemas.LIST), min_version='1.5'),
    memory_servers.update_memory_server: Operation(
        'Enable or disable a memory server', 'MemoryServer',
        body=memory_server_schemas.UPDATE, min_version='1.6'),
    decisions.approve: Operation(
        'Approve a recommended decision', 'DecisionDetail',
        body=decision_schemas.TRANSITION, min_version='1.1',
        conflicts=True),
    decisions.reject: Operation(
        'Reject a recommended decision', 'DecisionDetail',
        body=decision_schemas.TRANSITION, min_version='1.1',
        conflicts=True),
    decisions.rollback: Operation(
        'Roll back an applied or failed decision', 'DecisionDetail',
        body=decision_schemas.TRANSITION, min_version='1.1',
        conflicts=True),
}

ERROR_STATUSES = {
    400: 'Bad request: a malformed microversion, query string or body',
    401: 'No token, or not a valid one',
    403: 'Policy does not allow the request',
    404: 'No such resource, page marker or operation at this microversion',
    406: 'A microversion outside the supported range, or an Accept '
         'header that excludes JSON',
    409: "The resource's state does not allow the request",
    413: 'The body is larger than [api] max_request_body_size',
    415: 'The body is not application/json',
    500: 'A bug or an outage; the log has it under the request id',
    503: 'keystone could not be reached to validate the token; retry',
}


def _schema(schema, version):
    """``schema`` at ``version`` (None: every version, later additions
    marked), without its ``$schema``: OpenAPI 3.1 already means 2020-12.
    """
    if isinstance(schema, list):
        return [_schema(item, version) for item in schema]
    if not isinstance(schema, dict):
        return schema
    result = {key: _schema(value, version) for key, value in schema.items()
              if key not in ('$schema', 'properties', 'required',
                             responses.MIN_VERSION)}
    if responses.MIN_VERSION in schema:
        result.update(_since(schema[responses.MIN_VERSION], version,
                             schema.get('description')))
    if 'properties' in schema:
        properties = {
            name: _schema(value, version)
            for name, value in schema['properties'].items()
            if version is None or _supports(
                version, value.get(responses.MIN_VERSION,
                                   microversion.min_version_string()))}
        result['properties'] = properties
    if 'required' in schema:
        # Required at every version the document covers.
        properties = result.get('properties', {})
        result['required'] = [
            name for name in schema['required'] if name in properties
            and responses.MIN_VERSION not in properties[name]]
    return result


def _since(min_version, version, description=None):
    """``description`` and, in the reference, the note of something
    ``min_version`` added."""
    notes = {'description': description} if description else {}
    if version is not None or min_version == microversion.min_version_string():
        return notes
    return {'description': ' '.join(filter(None, (
                description, 'Since microversion %s.' % min_version))),
            responses.MIN_VERSION: min_version}


def _query_parameters(operation, version, max_limit):
    """The query parameters at ``version``; in the reference, each from
    the first version whose query schema has it. A schema's description
    becomes its parameter's."""
    if operation.query is None:
        return []
    first = {}
    for candidate in microversion.VERSIONS if version is None else [version]:
        if _supports(candidate, operation.min_version):
            for name, schema in operation.query(
                    max_limit, candidate)['properties'].items():
                first.setdefault(name, (candidate, schema))
    parameters = []
    for name, (added, schema) in first.items():
        schema = _schema(schema, version)
        parameters.append(dict(
            {'name': name, 'in': 'query', 'required': False,
             'schema': schema},
            **_since(added, version, schema.pop('description', None))))
    return parameters


def _path_parameters(path):
    return [{'name': name, 'in': 'path', 'required': True,
             'schema': common.UUID if name == 'uuid' else {'type': 'string'}}
            for name in _PATH_VARIABLE.findall(path)]


def _error_statuses(path, operation, parameters):
    statuses = {400, 406, 500}
    if operation.authenticated:
        statuses |= {401, 403, 503}
    if (_PATH_VARIABLE.search(path)
            or any(p['name'] == 'marker' for p in parameters)
            # A request without the microversion header is at the
            # oldest version, where the operation does not exist.
            or operation.min_version != microversion.min_version_string()):
        statuses.add(404)
    if operation.conflicts:
        statuses.add(409)
    if operation.body is not None:
        statuses |= {413, 415}
    return sorted(statuses)


def _types(schema):
    types = schema['type']
    return types if isinstance(types, list) else [types]


def _operation_id(function):
    """The handler's name in its module, e.g. ``instances.get_instance``."""
    module = sys.modules[function.func.__module__]
    name = next(name for name, value in vars(module).items()
                if value is function)
    return '%s.%s' % (module.__name__.rsplit('.', 1)[-1], name)


def _describe(path, function, operation, version, max_limit):
    parameters = (_path_parameters(path)
                  + _query_parameters(operation, version, max_limit))
    described = dict({
        'operationId': _operation_id(function),
        'summary': operation.summary,
        'tags': [path.split('/')[1] or 'versions'],
    }, **_since(operation.min_version, version))
    described['parameters'] = parameters + [
        {'$ref': '#/components/parameters/Microversion'}]
    if operation.body is not None:
        described['requestBody'] = {
            'required': 'null' not in _types(operation.body),
            'content': {'application/json': {'schema': _schema(
                dict(operation.body, type='object'), version)}}}
    if not operation.authenticated:
        described['security'] = []
    described['responses'] = {'200': {'$ref': '#/components/responses/%s'
                                      % operation.response}}
    described['responses'].update(
        (str(status), {'$ref': '#/components/responses/Error%d' % status})
        for status in _error_statuses(path, operation, parameters))
    return described


def is_json(path):
    return not any(path == prefix or path.startswith(prefix + '/')
                   for prefix in NON_JSON_PATHS)


def _paths(version, max_limit):
    paths = {}
    for path, methods in handler.ROUTE_DECLARATIONS.items():
        if not is_json(path):
            continue
        for method, function in methods.items():
            if function not in OPERATIONS:
                raise UndescribedRoute(
                    '%s %s has no entry in memcanal.api.openapi.OPERATIONS'
                    % (method, path))
            operation = OPERATIONS[function]
            if version is None or _supports(version, operation.min_version):
                paths.setdefault(path, {})[method.lower()] = _describe(
                    path, function, operation, version, max_limit)
    return paths


def _microversion_parameter(version):
    if version is None:
        return {
            'name': microversion.HEADER, 'in': 'header', 'required': False,
            'description': 'The microversion; none: the minimum, latest: '
                           'the maximum.',
            'schema': {'enum': ['%s %s' % (microversion.SERVICE_TYPE, v)
                                for v in microversion.VERSIONS + ['latest']]}}
    return {'name': microversion.HEADER, 'in': 'header', 'required': True,
            'schema': {'const': '%s %s' % (microversion.SERVICE_TYPE,
                                           version)}}


def _components(version):
    request_id = {'required': True, 'schema': {'type': 'string'},
                  'description': 'The id the service logs the request by.'}
    served_at = {'required': True, 'schema': {'type': 'string'},
                 'description': 'The microversion the request was served '
                                'at: "%s X.Y".' % microversion.SERVICE_TYPE}
    success = {
        name: {'description': 'OK',
               'headers': {microversion.HEADER: {'$ref': '#/components/'
                                                 'headers/Microversion'},
                           REQUEST_ID_HEADER: {'$ref': '#/components/'
                                               'headers/RequestId'}},
               'content': {'application/json': {'schema': responses.ref(
                   name)}}}
        for name in {operation.response
                     for operation in OPERATIONS.values()}}
    errors = {
        'Error%d' % status: {
            'description': description,
            'headers': {REQUEST_ID_HEADER: {'$ref': '#/components/headers/'
                                            'RequestId'}},
            'content': {'application/json': {'schema': responses.ref(
                'Error')}}}
        for status, description in ERROR_STATUSES.items()}
    return {
        'schemas': {name: _schema(schema, version)
                    for name, schema in responses.COMPONENTS.items()},
        'responses': dict(sorted(success.items()), **errors),
        'parameters': {'Microversion': _microversion_parameter(version)},
        'headers': {'Microversion': served_at, 'RequestId': request_id},
        'securitySchemes': {'token': {
            'type': 'apiKey', 'in': 'header', 'name': TOKEN_HEADER,
            'description': 'A keystone token (noauth2: any token; "admin" '
                           'is an admin).'}},
    }


def build(version=None, max_limit=DEFAULT_MAX_LIMIT):
    """The OpenAPI document: at microversion ``version`` ('X.Y'), or the
    reference of every version; pages of at most ``max_limit``."""
    return {
        'openapi': '3.1.0',
        'info': {
            'title': 'memcanal',
            'version': version or '%s-%s' % (
                microversion.min_version_string(),
                microversion.max_version_string()),
            'description': 'Per-VM working sets, miss-ratio curves and '
                           'memory decisions. Every request may name a '
                           'microversion in %s; see doc/api.md.'
                           % microversion.HEADER,
        },
        'security': [{'token': []}],
        'paths': _paths(version, max_limit),
        'components': _components(version),
    }


def dumps(document):
    return json.dumps(document, indent=2) + '\n'


def main():
    sys.stdout.write(dumps(build()))


if __name__ == '__main__':
    main()
