"""Query strings of /memory_servers (none), and the body of PATCH
/memory_servers/{uuid}."""

from memcanal.api.schemas import common

LIST = common.query_schema({})

# PATCH /memory_servers/{uuid}: whether pooling may lend from it.
UPDATE = {
    '$schema': 'https://json-schema.org/draft/2020-12/schema',
    'type': 'object',
    'properties': {
        'enabled': {'type': 'boolean',
                    'description': 'true: memory pooling may lend from '
                                   'it; false: it lends nothing more (its '
                                   'leases stay until their VMs are taken '
                                   'back).'},
    },
    'required': ['enabled'],
    'additionalProperties': False,
}
