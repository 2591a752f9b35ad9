"""Query strings of /demand_ratios: none."""

from memcanal.api.schemas import common

SHOW = common.query_schema({})
