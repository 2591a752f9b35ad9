"""JSON schemas of the response bodies, as handlers/views.py renders them.

memcanal.api.openapi puts them in the API reference; its tests validate
real responses against them at every microversion, so a view that
changes without its schema fails there.

A property a later microversion added carries its version in MIN_VERSION;
the reference keeps it with a "since" note, or, built for one version,
keeps or drops it. Every object requires all its properties unless it
says otherwise: the views render every key, null when unknown.
"""

from memcanal.api import errors
from memcanal.api.schemas import common
from memcanal.db import decisions as decisions_db
from memcanal.db import models

MIN_VERSION = 'x-memcanal-min-version'

INTEGER = {'type': 'integer'}
COUNT = {'type': 'integer', 'minimum': 0}
COUNT_OR_NULL = {'type': ['integer', 'null'], 'minimum': 0}
NUMBER_OR_NULL = {'type': ['number', 'null']}
STRING = {'type': 'string'}
STRING_OR_NULL = {'type': ['string', 'null']}
HOST_STATE = {'enum': list(models.HOST_STATES)}
# A 95 % interval of a size: [low bytes, high bytes].
BOUNDS = {'type': 'array', 'items': COUNT, 'minItems': 2, 'maxItems': 2}
TIME = {'type': 'string', 'format': 'date-time'}
TIME_OR_NULL = {'type': ['string', 'null'], 'format': 'date-time'}
UUID_OR_NULL = dict(common.UUID, type=['string', 'null'])


def since(version, schema):
    """``schema``, for a property microversion ``version`` added."""
    return dict(schema, **{MIN_VERSION: version})


def ref(name):
    return {'$ref': '#/components/schemas/%s' % name}


def obj(properties, optional=(), extra=False):
    """An object of ``properties``, all required but ``optional``;
    ``extra`` allows keys beyond them."""
    return {'type': 'object', 'properties': properties,
            'required': [name for name in properties
                         if name not in optional],
            'additionalProperties': extra}


def mapping(values):
    """An object of any keys, each valued ``values``."""
    return {'type': 'object', 'additionalProperties': values}


def array(items, **keywords):
    return dict({'type': 'array', 'items': items}, **keywords)


LINKS = array(obj({'rel': {'enum': ['next']}, 'href': STRING}))

VERSIONS = obj({'versions': array(obj({
    'id': STRING,
    'min_version': STRING,
    'max_version': STRING,
    'status': {'enum': ['CURRENT']},
    'links': array(obj({'rel': {'enum': ['self']}, 'href': STRING})),
}))})

HOST = obj({
    'uuid': common.UUID,
    'name': STRING,
    'state': HOST_STATE,
    'memory_total_bytes': COUNT,
    'memory_reserved_bytes': COUNT,
    'instance_count': COUNT,
    'last_sequence': COUNT,
    'reports_rejected': COUNT,
    'last_heartbeat_at': TIME_OR_NULL,
    'created_at': TIME,
    'updated_at': TIME_OR_NULL,
    'report_interval': since('1.3', NUMBER_OR_NULL),
    'availability_zone': since('1.4', STRING_OR_NULL),
    'allocation_ratio': since('1.4', NUMBER_OR_NULL),
    # Total less reserved, and that less demand: either may be negative.
    'capacity_bytes': since('1.4', INTEGER),
    'demand_bytes': since('1.4', COUNT),
    'headroom_bytes': since('1.4', INTEGER),
    'utilization': since('1.4', NUMBER_OR_NULL),
    'allocated_bytes': since('1.5', COUNT),
    'resident_bytes': since('1.5', COUNT),
    'lent_bytes': since('1.5', COUNT),
    'borrowed_bytes': since('1.5', COUNT),
    'hypervisor_type': since('1.7', STRING_OR_NULL),
    'nova_managed': since('1.7', {'type': 'boolean'}),
    'demand_bounds_bytes': since('1.8', BOUNDS),
    'pooling_admitted': since('1.10', {'type': 'boolean'}),
})

INSTANCE_PROPERTIES = {
    'uuid': common.UUID,
    'host_uuid': common.UUID,
    'project_id': STRING,
    'allocated_bytes': COUNT,
    'target_bytes': COUNT_OR_NULL,
    'floor_bytes': COUNT_OR_NULL,
    'ceiling_bytes': COUNT_OR_NULL,
    'opt_out': {'type': 'boolean'},
    'created_at': TIME,
    'updated_at': TIME_OR_NULL,
    'mechanism': since('1.1', STRING_OR_NULL),
    'target_changed_at': since('1.1', TIME_OR_NULL),
    'observed_bytes': since('1.3', COUNT_OR_NULL),
    'last_reported_at': since('1.3', TIME_OR_NULL),
    'deleted_at': since('1.3', TIME_OR_NULL),
    'flavor': since('1.4', STRING_OR_NULL),
    'wss_bytes': since('1.4', COUNT_OR_NULL),
    'resident_bytes': since('1.5', COUNT_OR_NULL),
    'paged_bytes': since('1.5', COUNT_OR_NULL),
    'resident_target_bytes': since('1.5', COUNT_OR_NULL),
    'wss_bounds_bytes': since('1.8', {'oneOf': [{'type': 'null'},
                                                BOUNDS]}),
    'reached_bytes': since('1.9', COUNT_OR_NULL),
}
INSTANCE = obj(INSTANCE_PROPERTIES)

# A curve point: [size bytes, miss ratio].
POINT = {'type': 'array', 'prefixItems': [
    {'type': 'integer', 'minimum': 1},
    {'type': 'number', 'minimum': 0, 'maximum': 1}],
    'minItems': 2, 'maxItems': 2}
REPORT_PROPERTIES = {
    'id': {'type': 'integer', 'minimum': 1},
    'sequence': {'type': 'integer', 'minimum': 1},
    'collected_at': TIME,
    'allocated_bytes': COUNT,
    'wss': mapping(COUNT),
    'mrc': mapping(array(POINT)),
    'guest_stats': mapping({'type': 'number'}),
    'wss_bounds': since('1.8', mapping(BOUNDS)),
    # A curve's band: its low and high ratios at the curve's sizes.
    'mrc_bands': since('1.8', mapping(obj({'low': array(POINT),
                                          'high': array(POINT)}))),
}
REPORT = obj(REPORT_PROPERTIES)
# A log's statistics as the agent sent them (each count optional), with
# missed_per_event added.
LOG_STATS = obj(dict({key: COUNT for key in (
    'events', 'logged', 'missed', 'handler_ns', 'vm_cpu_ns')},
    missed_per_event={'type': 'number', 'minimum': 0}),
    optional=('events', 'logged', 'missed', 'handler_ns', 'vm_cpu_ns'))
LATEST_REPORT = obj(dict(REPORT_PROPERTIES, logs=since('1.2', {
    'oneOf': [{'type': 'null'},
              obj({'prl': LOG_STATS, 'pml': LOG_STATS},
                  optional=('prl', 'pml'))]})))
INSTANCE_DETAIL = obj(dict(INSTANCE_PROPERTIES, latest_report={
    'oneOf': [{'type': 'null'}, ref('LatestReport')]}))

DECISION_PROPERTIES = {
    'uuid': common.UUID,
    'host_uuid': common.UUID,
    'kind': {'enum': list(decisions_db.FORWARD_ACTIONS)},
    'policy': STRING,
    'mode': {'enum': list(models.DECISION_MODES)},
    'state': {'enum': list(models.DECISION_STATES)},
    # What the policy decided, per VM; its shape is the policy's.
    'outputs': {'type': 'object'},
    'created_at': TIME,
    'updated_at': TIME_OR_NULL,
    'peer_host_uuid': since('1.4', UUID_OR_NULL),
}
DECISION = obj(DECISION_PROPERTIES)
# An action's parameters depend on its kind (a migration's hosts, a
# ratio's allocation_ratio, a page's stores): keys beyond these are
# allowed.
ACTION = obj({
    'uuid': common.UUID,
    'kind': {'enum': [decisions_db.RESTORE,
                      *decisions_db.FORWARD_ACTIONS.values()]},
    'instance_uuid': UUID_OR_NULL,
    'state': {'enum': list(models.ACTION_STATES)},
    'error': STRING_OR_NULL,
    'result': {},
    'updated_at': TIME_OR_NULL,
    'target_bytes': COUNT_OR_NULL,
    'previous_bytes': COUNT_OR_NULL,
    'mechanism': STRING_OR_NULL,
    'reached_bytes': since('1.9', COUNT_OR_NULL),
    'lagged': since('1.9', {'type': ['boolean', 'null']}),
}, extra=True)
EVENT = obj({
    'from_state': STRING_OR_NULL,
    'to_state': {'enum': list(models.DECISION_STATES)},
    'user_id': STRING_OR_NULL,
    'project_id': STRING_OR_NULL,
    'reason': STRING_OR_NULL,
    'created_at': TIME,
})
DECISION_DETAIL = obj(dict(
    DECISION_PROPERTIES,
    # What each VM reported when the policy ran.
    inputs={'type': 'object'},
    actions=array(ACTION),
    events=array(EVENT)))

MEMORY_SERVER = obj({
    'uuid': since('1.6', common.UUID),
    'enabled': since('1.6', {'type': 'boolean'}),
    'host_uuid': common.UUID,
    'host_name': STRING,
    'host_state': HOST_STATE,
    'address': STRING,
    'capacity_bytes': COUNT,
    'used_bytes': COUNT,
    'lent_bytes': COUNT,
    'free_bytes': INTEGER,
    'leases': array(obj({
        'instance_uuid': common.UUID,
        'borrower_host_uuid': common.UUID,
        'borrower_host_name': STRING,
        'lent_bytes': COUNT,
        'decision_uuid': UUID_OR_NULL,
        'created_at': TIME,
    })),
    'updated_at': TIME_OR_NULL,
})

_RATIOS = mapping(obj({'ratio': {'type': 'number', 'minimum': 0},
                       'instances': {'type': 'integer', 'minimum': 1}}))
DEMAND_RATIOS = obj({'flavors': _RATIOS, 'projects': _RATIOS,
                     'percentile': {'type': 'integer', 'minimum': 0,
                                    'maximum': 100}})

# The API-SIG error format (memcanal.api.util.error_response), its code
# one of memcanal.api.errors.
ERROR = obj({'errors': array(obj({
    'status': {'type': 'integer', 'minimum': 400, 'maximum': 599},
    'code': {'enum': sorted(
        value for name, value in vars(errors).items()
        if name.isupper() and isinstance(value, str))},
    'title': STRING,
    'detail': STRING,
    'request_id': STRING,
    # A bad microversion's error: the range accepted.
    'min_version': STRING,
    'max_version': STRING,
    # memcanal.decision.superseded and memcanal.decision.host_busy: the
    # decision in the way.
    'newer_decision': common.UUID,
    'busy_decision': common.UUID,
}, optional=('min_version', 'max_version', 'newer_decision',
             'busy_decision')), minItems=1)})

# Named schemas of the reference, in components/schemas.
COMPONENTS = {
    'Versions': VERSIONS,
    'Links': LINKS,
    'Host': HOST,
    'HostList': obj({'hosts': array(ref('Host'))}),
    'Instance': INSTANCE,
    'InstanceDetail': INSTANCE_DETAIL,
    'InstanceList': obj({'instances': array(ref('Instance')),
                         'links': ref('Links')}),
    'Report': REPORT,
    'LatestReport': LATEST_REPORT,
    'ReportList': obj({'reports': array(ref('Report')),
                       'links': ref('Links')}),
    'Decision': DECISION,
    'DecisionDetail': DECISION_DETAIL,
    'DecisionList': obj({'decisions': array(ref('Decision')),
                         'links': ref('Links')}),
    'MemoryServer': MEMORY_SERVER,
    'MemoryServerList': obj({'memory_servers': array(ref('MemoryServer'))}),
    'DemandRatios': DEMAND_RATIOS,
    'Error': ERROR,
}
