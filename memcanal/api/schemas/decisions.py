"""Query strings and bodies of /decisions."""

from memcanal.api.schemas import common
from memcanal.db import models

SHOW = common.query_schema({})


def list_query(max_limit):
    return common.query_schema({
        'limit': common.limit(max_limit),
        # The uuid of the last decision of the previous page.
        'marker': common.UUID,
        # Only this host's decisions.
        'host': common.UUID,
        'state': {'type': 'string', 'enum': list(models.DECISION_STATES)},
    })


# POST /decisions/{uuid}/{approve,reject,rollback}: the body is optional.
TRANSITION = {
    '$schema': 'https://json-schema.org/draft/2020-12/schema',
    'type': ['object', 'null'],
    'properties': {
        'reason': {'type': 'string', 'maxLength': 4000,
                   'pattern': common.TEXT_PATTERN},
    },
    'additionalProperties': False,
}
