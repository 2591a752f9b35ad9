"""Query strings of /memory_servers: none."""

from memcanal.api.schemas import common

LIST = common.query_schema({})
