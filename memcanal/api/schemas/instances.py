"""Query strings of /instances."""

from memcanal.api.schemas import common

SHOW = common.query_schema({})


def list_query(max_limit, with_deleted=False):
    """The list's query; ``deleted`` from microversion 1.3."""
    properties = {
        'limit': common.limit(max_limit),
        # The uuid of the last instance of the previous page.
        'marker': common.UUID,
        # The uuid of a host: only instances it runs.
        'host': common.UUID,
        # Only this project's instances; another project than the
        # token's needs memcanal:instances:list:all_projects.
        'project_id': {'type': 'string', 'minLength': 1, 'maxLength': 255,
                       'pattern': common.TEXT_PATTERN},
    }
    if with_deleted:
        # true: only the instances gone from their host's reports.
        properties['deleted'] = {'enum': ['true', 'false']}
    return common.query_schema(properties)


_BYTES_OR_NULL = {'type': ['integer', 'null'], 'minimum': 0,
                  'maximum': 2 ** 63 - 1}

# PATCH /instances/{uuid}: the settings to change, at least one.
UPDATE = {
    '$schema': 'https://json-schema.org/draft/2020-12/schema',
    'type': 'object',
    'properties': {
        'opt_out': {'type': 'boolean'},
        'floor_bytes': _BYTES_OR_NULL,
        'ceiling_bytes': _BYTES_OR_NULL,
        # memcanal.agent.driver.MECHANISMS; null: the service's default.
        'mechanism': {'enum': ['balloon', 'hotplug', None]},
    },
    'additionalProperties': False,
    'minProperties': 1,
}
