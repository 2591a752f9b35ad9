"""Microversions: ``OpenStack-API-Version: memcanal X.Y``.

A request without the header gets the minimum version, ``latest`` gets the
maximum; anything else must be listed in VERSIONS. Every response names
the version it was served at, and says it varies with that header.

To add a version: append it to VERSIONS with a comment saying what changed
(and document it in doc/api.md), then branch in handlers with
``is_supported(req, 'X.Y')``.
"""

import microversion_parse
import webob.exc

from memcanal.api import errors
from memcanal.api import util

SERVICE_TYPE = 'memcanal'
HEADER = 'OpenStack-API-Version'
# The requested microversion_parse.Version, as the library's own
# middleware names it.
MICROVERSION_ENVIRON = '%s.microversion' % SERVICE_TYPE

# Every version this service can speak, oldest first, without gaps.
VERSIONS = [
    '1.0',  # Hosts, instances and their reports, read only.
    '1.1',  # Decisions (list, show, approve, reject, rollback) and
            # PATCH /instances/{uuid} (opt-out, floor, ceiling, mechanism).
    '1.2',  # GET /instances/{uuid}: latest_report.logs, the PRL and PML
            # log statistics of the report's interval.
    '1.3',  # Instances: observed_bytes, last_reported_at, deleted_at, and
            # GET /instances?deleted=true for those gone from their host;
            # hosts: report_interval.
    '1.4',  # Hosts: availability_zone, allocation_ratio and measured
            # capacity_bytes, demand_bytes, headroom_bytes, utilization;
            # instances: flavor, wss_bytes; GET /demand_ratios.
    '1.5',  # Memory pooling: GET /memory_servers (who lends what to
            # whom); hosts: allocated_bytes, resident_bytes, lent_bytes,
            # borrowed_bytes; instances: resident_bytes, paged_bytes,
            # resident_target_bytes.
    '1.6',  # Memory servers: uuid and enabled, and PATCH
            # /memory_servers/{uuid} {"enabled": ...}: a new memory
            # server lends nothing until an operator enables it.
    '1.7',  # Hosts: hypervisor_type and nova_managed (false on Xen hosts:
            # no placement ratio, nova filter or migration applies).
    '1.8',  # 95 % intervals of sampled estimates: instances'
            # wss_bounds_bytes, reports' wss_bounds and mrc_bands, hosts'
            # demand_bounds_bytes.
    '1.9',  # Instances: reached_bytes, what the guest reached at the last
            # memory target; decisions' actions: reached_bytes and lagged.
    '1.10',  # Hosts: pooling_admitted, and PATCH /hosts/{uuid}
             # {"pooling_admitted": ...}: a new host neither borrows nor
             # lends until an operator admits it.
]


def min_version_string():
    return VERSIONS[0]


def max_version_string():
    return VERSIONS[-1]


def is_supported(req, version):
    """Whether the request was made at ``version`` ('X.Y') or later."""
    return (req.environ[MICROVERSION_ENVIRON]
            >= microversion_parse.parse_version_string(version))


def require(req, version):
    """404, as for an unknown path, unless the request is at ``version``
    or later: the resource does not exist at older versions."""
    if not is_supported(req, version):
        raise webob.exc.HTTPNotFound(
            'No resource at %s before microversion %s.' % (req.path_info,
                                                           version),
            comment=errors.ROUTE_NOT_FOUND)


class MicroversionMiddleware:
    """Pick the request's microversion; stamp it on the response.

    microversion_parse.middleware.MicroversionMiddleware does the same but
    renders its errors through webob's Accept negotiation (HTML for
    ``Accept: */*``), so this one, built on the same
    ``microversion_parse.extract_version``, answers them in the API's JSON
    error format instead.
    """

    def __init__(self, application):
        self.application = application

    @staticmethod
    def _error(req, exc, code):
        # Like placement, say which versions would have been accepted.
        response = util.error_response(
            req.environ, exc, code=code, min_version=min_version_string(),
            max_version=max_version_string())
        response.headers.add('Vary', HEADER)
        return response

    @util.wsgify
    def __call__(self, req):
        try:
            version = microversion_parse.extract_version(
                req.headers, SERVICE_TYPE, VERSIONS)
        except ValueError as exc:
            # Well formed but not one of VERSIONS.
            return self._error(
                req, webob.exc.HTTPNotAcceptable('Invalid microversion: %s'
                                                 % exc),
                errors.MICROVERSION_NOT_ACCEPTABLE)
        except TypeError as exc:
            # Not X.Y at all.
            return self._error(
                req,
                webob.exc.HTTPBadRequest('Invalid microversion: %s' % exc),
                errors.MICROVERSION_INVALID)
        req.environ[MICROVERSION_ENVIRON] = version
        response = req.get_response(self.application)
        response.headers[HEADER] = '%s %s' % (SERVICE_TYPE, version)
        response.headers.add('Vary', HEADER)
        return response
