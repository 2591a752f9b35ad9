"""Query strings of /hosts: none; there are few hosts, no pages."""

from memcanal.api.schemas import common

LIST = common.query_schema({})
SHOW = common.query_schema({})
