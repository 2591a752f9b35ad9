"""Error codes of the REST API.

Every error response carries one of these in its ``code`` field. They are
part of the API: clients branch on them, so an existing code never changes
meaning and is never reused. Add new ones; don't rename.
"""

# An error nobody gave a more precise code; also any HTTP error raised
# without one.
DEFAULT = 'memcanal.undefined_code'
# A bug or an outage (e.g. the database is unreachable); the logs say more,
# under the response's request_id.
INTERNAL_ERROR = 'memcanal.internal_error'

# Authentication and authorization.
AUTH_UNAUTHORIZED = 'memcanal.auth.unauthorized'
# keystone could not be reached to validate the token; retry later.
AUTH_UNAVAILABLE = 'memcanal.auth.unavailable'
POLICY_DENIED = 'memcanal.policy.denied'

# Content and version negotiation.
MICROVERSION_NOT_ACCEPTABLE = 'memcanal.microversion.not_acceptable'
MICROVERSION_INVALID = 'memcanal.microversion.invalid'
ACCEPT_NOT_ACCEPTABLE = 'memcanal.accept.not_acceptable'

# Routing.
ROUTE_NOT_FOUND = 'memcanal.route.not_found'
METHOD_NOT_ALLOWED = 'memcanal.method.not_allowed'

# Query strings and request bodies.
QUERY_INVALID = 'memcanal.query.invalid'
BODY_INVALID = 'memcanal.body.invalid'
# The body is larger than [api] max_request_body_size.
BODY_TOO_LARGE = 'memcanal.body.too_large'
# The body's Content-Type is not application/json.
BODY_UNSUPPORTED_MEDIA_TYPE = 'memcanal.body.unsupported_media_type'
MARKER_NOT_FOUND = 'memcanal.marker.not_found'

# Resources.
HOST_NOT_FOUND = 'memcanal.host.not_found'
INSTANCE_NOT_FOUND = 'memcanal.instance.not_found'
DECISION_NOT_FOUND = 'memcanal.decision.not_found'
MEMORY_SERVER_NOT_FOUND = 'memcanal.memory_server.not_found'
# The decision's state does not allow what was asked (approving a rejected
# decision, rolling back one still waiting for approval).
DECISION_STATE_CONFLICT = 'memcanal.decision.state_conflict'
# Rolling back a decision a newer one of the same host changed since; the
# error's ``newer_decision`` names that one, to roll back first.
DECISION_SUPERSEDED = 'memcanal.decision.superseded'
# Another decision of the host is being carried out (approved or rolling
# back); the error's ``busy_decision`` names it.
DECISION_HOST_BUSY = 'memcanal.decision.host_busy'
