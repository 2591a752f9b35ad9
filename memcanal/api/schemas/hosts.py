"""Query strings of /hosts: none; there are few hosts, no pages. The body
of PATCH /hosts/{uuid}."""

from memcanal.api.schemas import common

LIST = common.query_schema({})
SHOW = common.query_schema({})

# PATCH /hosts/{uuid}: whether the host takes part in memory pooling.
UPDATE = {
    '$schema': 'https://json-schema.org/draft/2020-12/schema',
    'type': 'object',
    'properties': {
        'pooling_admitted': {
            'type': 'boolean',
            'description': 'true: its VMs may borrow memory of other '
                           'hosts, and its memory server (once enabled) '
                           'may lend; false: it borrows and lends nothing '
                           'more (what it lends or borrows stays until '
                           'its VMs are taken back).'},
    },
    'required': ['pooling_admitted'],
    'additionalProperties': False,
}
