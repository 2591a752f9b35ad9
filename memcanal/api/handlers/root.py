"""``GET /``: which API versions this service speaks. No auth needed."""

from memcanal.api import microversion
from memcanal.api import util


@util.wsgify
def home(req):
    min_version = microversion.min_version_string()
    max_version = microversion.max_version_string()
    version = {
        'id': 'v%s' % min_version,
        'min_version': min_version,
        'max_version': max_version,
        # There is one major version, so it is the current one.
        'status': 'CURRENT',
        'links': [{
            # "This same URL", relative like placement's, so the service
            # never needs to know the address it is reached by.
            'rel': 'self',
            'href': '',
        }],
    }
    return util.json_response({'versions': [version]})
