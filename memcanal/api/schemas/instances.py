"""Query strings of /instances."""

from memcanal.api.schemas import common

SHOW = common.query_schema({})


def list_query(max_limit):
    return common.query_schema({
        'limit': common.limit(max_limit),
        # The uuid of the last instance of the previous page.
        'marker': common.UUID,
        # The uuid of a host: only instances it runs.
        'host': common.UUID,
        # Only this project's instances; another project than the
        # token's needs memcanal:instances:list:all_projects.
        'project_id': {'type': 'string', 'minLength': 1, 'maxLength': 255},
    })
