"""Pieces every query-string schema shares."""

import re

# As agents may report them (memcanal.rpc.reports.UUID_PATTERN): hex,
# dashes optional, either case. Lookups are exact, so a differently
# written uuid names nothing.
UUID = {'type': 'string',
        'pattern': ('^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?'
                    '[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$')}

# Free text: anything but NUL, which PostgreSQL can neither store nor
# compare (memcanal.api.util refuses it in every query and body string).
TEXT_PATTERN = '^[^\\x00]*$'

# Report ids are SQL INTEGERs; a larger marker could only fail in the DB.
MAX_ID = 2 ** 31 - 1


def limit(max_limit):
    """``limit``: a page of 1 to ``[api] max_limit`` items."""
    return {'type': 'integer', 'minimum': 1, 'maximum': max_limit,
            'description': 'Items per page; the most, [api] max_limit, '
                           'without it.'}


def query_schema(properties):
    return {
        '$schema': 'https://json-schema.org/draft/2020-12/schema',
        'type': 'object',
        'properties': properties,
        'additionalProperties': False,
    }


def is_uuid(value):
    """Whether a path segment can be a uuid, as UUID would accept it."""
    return re.match(UUID['pattern'], value) is not None
