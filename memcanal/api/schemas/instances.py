"""Query strings of /instances."""

from memcanal.api.schemas import common

SHOW = common.query_schema({})


def list_query(max_limit, with_deleted=False):
    """The list's query; ``deleted`` from microversion 1.3."""
    properties = {
        'limit': common.limit(max_limit),
        'marker': dict(common.UUID, description=(
            'The uuid of the last instance of the previous page.')),
        'host': dict(common.UUID, description=(
            'The uuid of a host: only the instances it runs.')),
        'project_id': {
            'type': 'string', 'minLength': 1, 'maxLength': 255,
            'pattern': common.TEXT_PATTERN,
            'description': "Only this project's instances; another "
                           "project than the token's needs "
                           "memcanal:instances:list:all_projects."},
    }
    if with_deleted:
        properties['deleted'] = {
            'enum': ['true', 'false'],
            'description': "true: only the instances gone from their "
                           "host's reports."}
    return common.query_schema(properties)


_BYTES_OR_NULL = {'type': ['integer', 'null'], 'minimum': 0,
                  'maximum': 2 ** 63 - 1}

# PATCH /instances/{uuid}: the settings to change, at least one.
UPDATE = {
    '$schema': 'https://json-schema.org/draft/2020-12/schema',
    'type': 'object',
    'properties': {
        'opt_out': {'type': 'boolean',
                    'description': 'Keep the VM out of every policy.'},
        'floor_bytes': dict(_BYTES_OR_NULL, description=(
            'The least memory a target may give the VM; null: none.')),
        'ceiling_bytes': dict(_BYTES_OR_NULL, description=(
            'The most memory a target may give the VM; null: none.')),
        # memcanal.agent.driver.MECHANISMS.
        'mechanism': {'enum': ['balloon', 'hotplug', None],
                      'description': "How the VM is resized; null: "
                                     "[optimizer] default_mechanism."},
    },
    'additionalProperties': False,
    'minProperties': 1,
}
