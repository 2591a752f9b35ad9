"""Query strings and bodies of /decisions."""

from memcanal.api.schemas import common
from memcanal.db import models

SHOW = common.query_schema({})


def list_query(max_limit):
    return common.query_schema({
        'limit': common.limit(max_limit),
        'marker': dict(common.UUID, description=(
            'The uuid of the last decision of the previous page.')),
        'host': dict(common.UUID, description="Only this host's decisions."),
        'state': {'type': 'string', 'enum': list(models.DECISION_STATES),
                  'description': 'Only the decisions in this state.'},
    })


# POST /decisions/{uuid}/{approve,reject,rollback}: the body is optional.
TRANSITION = {
    '$schema': 'https://json-schema.org/draft/2020-12/schema',
    'type': ['object', 'null'],
    'properties': {
        'reason': {'type': 'string', 'maxLength': 4000,
                   'pattern': common.TEXT_PATTERN,
                   'description': "Why, kept in the decision's events."},
    },
    'additionalProperties': False,
}
