"""The wire format of an agent report, and its validation.

A report is a dict::

    {"host_uuid": "<uuid from register_host>",
     "sequence": 42,                       # per host, from 1, increasing
     "collected_at": "2026-11-22T09:00:00Z",
     "availability_zone": "nova",          # optional: the host's zone
     "instances": [
        {"uuid": "<instance uuid>", "project_id": "<project>",
         "allocated_bytes": 1073741824, "observed_bytes": null,
         "flavor": "m1.small",             # optional: the flavor's name
         "wss": {"<estimator>": <bytes>, ...},
         "mrc": {"<method>": "<packed curve>", ...},
         "wss_bounds": {"<estimator>": [<low bytes>, <high bytes>]},
         "mrc_bands": {"<method>": {"low": "<packed curve>",
                                    "high": "<packed curve>"}},
         "guest_stats": {"<name>": <number>, ...},
         "logs": {"prl": <log stats>, "pml": <log stats>},
         "paging": {"resident_bytes": .., "paged_bytes": .., # optional
                    "faults": .., "swapped_out": ..}}],
     "memserver": {"address": "10.0.0.5:7070",     # optional: the host
                   "capacity_bytes": .., "used_bytes": ..}}  # lends memory

``logs`` says what the VM's page-reference logs did during this
report's interval (not since boot); an older agent sends none. Each log,
and each of its keys, is optional; all are integers >= 0::

    {"events": 120,        # log-full events
     "logged": 61440,      # GPAs written to the log
     "missed": 3,          # GPAs lost while a log-full handler ran
     "handler_ns": 250000, # CPU time of the log-full handlers
     "vm_cpu_ns": 0}       # of which taken from the VM's own CPU

A curve is packed (memcanal.estimation.packed_curve: base64 of deflated
(uint64 size bytes, float64 miss ratio) records) since RPC 1.4; agents
before it send [[<size bytes>, <miss ratio>], ...], still accepted. Either
way sizes are >= 1 and strictly increasing, ratios in 0..1.

Since RPC 1.7 an estimate made from a sample carries its error bar
(doc/estimation.md): ``wss_bounds`` the 95 % interval of a working set
of ``wss`` (low <= high), ``mrc_bands`` a band around a curve of
``mrc``, its low and high ratios packed at the curve's own sizes (low <=
high at each). ``guest_stats`` then also says ``sampling_confidence``
(0.95), ``sampled_pages`` and ``sampling_rate``. Both fields are
optional, so reports of agents before 1.7 are still accepted; an
interval that names no estimate of the report, is upside down or does
not match its curve's sizes rejects the report (``report.bad_interval``).

The service validates every report before storing anything from it, so a
malformed one is rejected whole with a stable code.
"""

import math
import operator

import fastjsonschema
import numpy as np
from oslo_utils import timeutils

from memcanal.estimation import packed_curve
from memcanal import exception

NAME_PATTERN = '^[a-z][a-z0-9_]{0,31}$'
UUID_PATTERN = ('^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?'
                '[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$')
NON_NEGATIVE_INT = {'type': 'integer', 'minimum': 0}
# A packed curve (the points are checked apart from the schema).
PACKED_CURVE = {'type': 'string', 'minLength': 1}
LOG_STATS_SCHEMA = {
    'type': 'object',
    'additionalProperties': False,
    'properties': {key: NON_NEGATIVE_INT for key in (
        'events', 'logged', 'missed', 'handler_ns', 'vm_cpu_ns')},
}

INSTANCE_SCHEMA = {
    'type': 'object',
    'required': ['uuid', 'project_id', 'allocated_bytes'],
    'additionalProperties': False,
    'properties': {
        'uuid': {'type': 'string', 'pattern': UUID_PATTERN},
        'project_id': {'type': 'string', 'minLength': 1, 'maxLength': 255},
        'allocated_bytes': NON_NEGATIVE_INT,
        # The memory the hypervisor shows the VM at (null: its boot
        # memory). Agents before 1.2 called it target_bytes; it is read
        # as observed_bytes.
        'observed_bytes': {'type': ['integer', 'null'], 'minimum': 0},
        'target_bytes': {'type': ['integer', 'null'], 'minimum': 0},
        'flavor': {'type': ['string', 'null'], 'maxLength': 255},
        'wss': {
            'type': 'object',
            'propertyNames': {'pattern': NAME_PATTERN},
            'additionalProperties': NON_NEGATIVE_INT,
        },
        # The points are checked by _check_packed_points (all of a
        # report's at once, in numpy) or _check_point_list (one plain
        # loop), their count first: several times faster than the
        # schema walking each of up to 256 x 2 numbers of every curve.
        'mrc': {
            'type': 'object',
            'propertyNames': {'pattern': NAME_PATTERN},
            'additionalProperties': {'type': ['string', 'array'],
                                     'minLength': 1, 'minItems': 1},
        },
        # RPC 1.7: a 95 % interval of an estimate of ``wss``, [low,
        # high] bytes, and a band of a curve of ``mrc`` at its sizes.
        'wss_bounds': {
            'type': 'object',
            'propertyNames': {'pattern': NAME_PATTERN},
            'additionalProperties': {'type': 'array',
                                     'items': NON_NEGATIVE_INT,
                                     'minItems': 2, 'maxItems': 2},
        },
        'mrc_bands': {
            'type': 'object',
            'propertyNames': {'pattern': NAME_PATTERN},
            'additionalProperties': {
                'type': 'object',
                'required': ['low', 'high'],
                'additionalProperties': False,
                'properties': {'low': PACKED_CURVE, 'high': PACKED_CURVE},
            },
        },
        'guest_stats': {
            'type': 'object',
            'propertyNames': {'maxLength': 64},
            'additionalProperties': {'type': 'number'},
        },
        'logs': {
            'type': 'object',
            'additionalProperties': False,
            'properties': {'prl': LOG_STATS_SCHEMA, 'pml': LOG_STATS_SCHEMA},
        },
        # A paged VM: what stays resident, what its pager moved out, and
        # the interval's faults and swap-outs.
        'paging': {
            'type': 'object',
            'additionalProperties': False,
            'required': ['resident_bytes', 'paged_bytes'],
            'properties': {key: NON_NEGATIVE_INT for key in (
                'resident_bytes', 'paged_bytes', 'faults', 'swapped_out')},
        },
    },
}

# A host running memcanal-memserver registers it with every report.
MEMSERVER_SCHEMA = {
    'type': 'object',
    'additionalProperties': False,
    'required': ['address', 'capacity_bytes'],
    'properties': {
        'address': {'type': 'string', 'minLength': 3, 'maxLength': 255,
                    'pattern': '^[^\\s:]+:[0-9]{1,5}$'},
        'capacity_bytes': NON_NEGATIVE_INT,
        'used_bytes': NON_NEGATIVE_INT,
    },
}

REPORT_SCHEMA = {
    # Draft 7, the latest fastjsonschema compiles; every keyword used here
    # means the same in later drafts.
    '$schema': 'http://json-schema.org/draft-07/schema#',
    'type': 'object',
    'required': ['host_uuid', 'sequence', 'collected_at', 'instances'],
    'additionalProperties': False,
    'properties': {
        'host_uuid': {'type': 'string', 'pattern': UUID_PATTERN},
        'sequence': {'type': 'integer', 'minimum': 1},
        'collected_at': {'type': 'string', 'maxLength': 64},
        'availability_zone': {'type': ['string', 'null'], 'maxLength': 255},
        'instances': {'type': 'array', 'items': INSTANCE_SCHEMA},
        'memserver': MEMSERVER_SCHEMA,
    },
}

# Compiled to Python once: twenty times faster than jsonschema's walk of
# every report, which was a fifth of the service's time per report.
_VALIDATOR = fastjsonschema.compile(REPORT_SCHEMA)


def _non_finite_key(stats):
    """The first key of ``stats`` whose value is NaN or infinite, or None.

    JSON schema's "number" admits NaN and infinity, and NaN passes every
    minimum and maximum, so they are looked for separately. Guest
    statistics and miss ratios are the only numbers a report may give
    as floats; "integer" already excludes both.
    """
    for key, value in stats.items():
        if isinstance(value, float) and not math.isfinite(value):
            return key
    return None


_RATIO_TYPES = (int, float)
_RATIO_TYPE_SET = frozenset(_RATIO_TYPES)


def _good_curve(points):
    """Whether every point is good, as _check_point_list judges them, in a
    few passes of built-ins over the whole curve: faster than its loop,
    which then only says what is wrong with a bad one."""
    if not points:
        return True
    try:
        if set(map(type, points)) != {list}:
            return False
        sizes = [size for size, _ratio in points]
        ratios = [ratio for _size, ratio in points]
    except ValueError:  # a point of other than two numbers
        return False
    if (set(map(type, sizes)) != {int}
            or not set(map(type, ratios)) <= _RATIO_TYPE_SET):
        return False
    if not (sizes[0] >= 1 and all(map(operator.lt, sizes, sizes[1:]))
            and min(ratios) >= 0 and max(ratios) <= 1):
        return False
    # min and max may step over a NaN (not over a ratio too large to sum:
    # max stops at a NaN only when it comes first, and then fails); the
    # sum of any is NaN, unequal to itself.
    total = sum(ratios)
    return total == total


def _packed_points(where, text, max_mrc_points):
    """The points of a packed curve, counted and decoded (their values
    are _check_packed_points' to judge).

    The count is checked before anything else, so an oversized curve
    costs nothing to refuse.
    """
    if len(text) > packed_curve.max_text_length(max_mrc_points):
        raise exception.InvalidReport(
            'report.mrc_too_large', '%s has more than %d points' % (
                where, max_mrc_points))
    try:
        points = packed_curve.points_array(text, max_mrc_points)
    except ValueError as err:
        raise exception.InvalidReport('report.malformed',
                                      '%s: %s' % (where, err))
    if len(points) > max_mrc_points:
        raise exception.InvalidReport(
            'report.mrc_too_large', '%s has more than %d points' % (
                where, max_mrc_points))
    if not len(points):
        raise exception.InvalidReport('report.malformed',
                                      '%s has no points' % where)
    return points


def _check_packed_points(curves):
    """Every point of ``curves`` ((where, points) pairs) as
    _check_point_list judges a list's: all of a report's at once, in a
    few numpy operations; only a bad curve is then looked at alone, to
    say which it is and what is wrong."""
    if not curves:
        return
    points = np.concatenate([array for _where, array in curves])
    sizes, ratios = points['size'], points['ratio']
    rising = sizes[1:] > sizes[:-1]
    # Where a curve starts, its size need not exceed the one before.
    starts = np.cumsum([len(array) for _where, array in curves])[:-1]
    rising[starts - 1] = True
    # NaN fails both comparisons.
    if (sizes.min() >= 1 and np.all(rising)
            and np.all((ratios >= 0) & (ratios <= 1))):
        return
    for where, array in curves:
        _check_curve_points(where, array['size'], array['ratio'])


def _check_curve_points(where, sizes, ratios):
    if sizes[0] < 1 or not np.all((ratios >= 0) & (ratios <= 1)):
        if not np.isfinite(ratios).all():
            raise exception.InvalidReport(
                'report.not_finite', 'non-finite miss ratio in %s' % where)
        raise exception.InvalidReport(
            'report.malformed', '%s: sizes must be >= 1 bytes and miss '
            'ratios in 0..1' % where)
    if not np.all(sizes[1:] > sizes[:-1]):
        raise exception.InvalidReport(
            'report.mrc_unordered',
            '%s sizes are not strictly increasing' % where)


def _check_point_list(where, points, max_mrc_points):
    """Points are [size bytes >= 1, miss ratio in 0..1], sizes increasing,
    in a list (agents before RPC 1.4).

    The count is checked before anything else, so an oversized curve
    costs nothing to refuse.
    """
    if len(points) > max_mrc_points:
        raise exception.InvalidReport(
            'report.mrc_too_large', '%s has %d points, more than %d' % (
                where, len(points), max_mrc_points))
    if _good_curve(points):
        return
    previous = 0
    for index, point in enumerate(points):
        if type(point) is not list or len(point) != 2:
            raise exception.InvalidReport(
                'report.malformed', '%s.%d: a point is [size, miss ratio]'
                % (where, index))
        size, ratio = point
        # One test for a good point, most of a report's validation time;
        # what is wrong is told apart only for a bad one. NaN fails
        # 0 <= ratio, infinity ratio <= 1.
        if (type(size) is not int or size < 1
                or type(ratio) not in _RATIO_TYPES or not 0 <= ratio <= 1):
            if isinstance(ratio, float) and not math.isfinite(ratio):
                raise exception.InvalidReport(
                    'report.not_finite', 'non-finite number at %s.%d.1' % (
                        where, index))
            raise exception.InvalidReport(
                'report.malformed', '%s.%d: %r is not [size >= 1 bytes, '
                'miss ratio in 0..1]' % (where, index, point))
        if size <= previous:
            raise exception.InvalidReport(
                'report.mrc_unordered',
                '%s sizes are not strictly increasing' % where)
        previous = size


def _bad_interval(where, detail):
    return exception.InvalidReport('report.bad_interval',
                                   '%s: %s' % (where, detail))


def _check_wss_bounds(index, sample):
    """Each interval bounds an estimate the report gives, low <= high."""
    for name, (low, high) in sample.get('wss_bounds', {}).items():
        where = 'instances.%d.wss_bounds.%s' % (index, name)
        if name not in sample.get('wss', {}):
            raise _bad_interval(where, 'no such estimate in wss')
        if low > high:
            raise _bad_interval(where, 'low %d is above high %d' % (low,
                                                                   high))


def _same_sizes(edge, curve):
    """Whether a band's ``edge`` (packed points) is at the sizes of its
    ``curve``: packed points, or a list from an agent before RPC 1.4."""
    if isinstance(curve, np.ndarray):
        return np.array_equal(edge['size'], curve['size'])
    return edge['size'].tolist() == [size for size, _ratio in curve]


def _check_mrc_bands(index, sample, max_mrc_points, curves):
    """Each band is of a curve the report gives, at that curve's sizes
    (``curves``: method -> its checked points), its low ratios at most
    its high ones and both in 0..1."""
    for method, band in sample.get('mrc_bands', {}).items():
        where = 'instances.%d.mrc_bands.%s' % (index, method)
        if method not in curves:
            raise _bad_interval(where, 'no such curve in mrc')
        low, high = (_packed_points('%s.%s' % (where, edge), band[edge],
                                    max_mrc_points)
                     for edge in ('low', 'high'))
        for edge in (low, high):
            if not _same_sizes(edge, curves[method]):
                raise _bad_interval(where, 'not at the sizes of its curve')
            # NaN fails both comparisons.
            if not np.all((edge['ratio'] >= 0) & (edge['ratio'] <= 1)):
                raise _bad_interval(where, 'ratios must be in 0..1')
        if np.any(low['ratio'] > high['ratio']):
            raise _bad_interval(where, 'low is above high at %d bytes' % (
                low['size'][np.argmax(low['ratio'] > high['ratio'])]))


def _check_instance(index, sample, max_mrc_points, packed):
    """Check the instance's numbers but for its packed curves' points,
    which are added to ``packed`` for _check_packed_points."""
    curves = {}
    for method, curve in sample.get('mrc', {}).items():
        where = 'instances.%d.mrc.%s' % (index, method)
        if isinstance(curve, str):
            points = _packed_points(where, curve, max_mrc_points)
            packed.append((where, points))
            curves[method] = points
        else:
            _check_point_list(where, curve, max_mrc_points)
            curves[method] = curve
    _check_wss_bounds(index, sample)
    _check_mrc_bands(index, sample, max_mrc_points, curves)
    bad_key = _non_finite_key(sample.get('guest_stats', {}))
    if bad_key is not None:
        raise exception.InvalidReport(
            'report.not_finite', 'non-finite number at '
            'instances.%d.guest_stats.%s' % (index, bad_key))


def _observed(sample):
    """``sample`` with an older agent's target_bytes read as what it is,
    observed_bytes."""
    if 'target_bytes' not in sample:
        return sample
    sample = dict(sample)
    legacy = sample.pop('target_bytes')
    sample.setdefault('observed_bytes', legacy)
    return sample


def validate_report(report, max_mrc_points, max_instances):
    """Return ``report`` with collected_at parsed and every instance's
    observed memory under observed_bytes, or raise InvalidReport."""
    if not isinstance(report, dict):
        raise exception.InvalidReport('report.malformed',
                                      'a report must be an object')
    try:
        _VALIDATOR(report)
    except fastjsonschema.JsonSchemaValueException as error:
        # error.message is error.name ('data.instances[0].wss') and what
        # is wrong there.
        where = '.'.join(str(p) for p in error.path[1:]) or 'report'
        raise exception.InvalidReport('report.malformed', '%s: %s' % (
            where, error.message[len(error.name):].strip()))
    if len(report['instances']) > max_instances:
        raise exception.InvalidReport(
            'report.too_many_instances',
            '%d instances, more than %d' % (len(report['instances']),
                                            max_instances))
    uuids = [sample['uuid'] for sample in report['instances']]
    if len(set(uuids)) != len(uuids):
        raise exception.InvalidReport('report.duplicate_instance',
                                      'an instance appears twice')
    packed = []
    for index, sample in enumerate(report['instances']):
        _check_instance(index, sample, max_mrc_points, packed)
    _check_packed_points(packed)
    try:
        collected_at = timeutils.normalize_time(
            timeutils.parse_isotime(report['collected_at']))
    except ValueError as err:
        raise exception.InvalidReport('report.malformed',
                                      'collected_at: %s' % err)
    return dict(report, collected_at=collected_at,
                instances=[_observed(s) for s in report['instances']])
