"""Query strings of /instances/{uuid}/reports."""

from memcanal.api.schemas import common


def list_query(max_limit):
    return common.query_schema({
        'limit': common.limit(max_limit),
        'marker': {'type': 'integer', 'minimum': 1,
                   'maximum': common.MAX_ID,
                   'description': 'The id of the last (oldest) report of '
                                  'the previous page.'},
    })
