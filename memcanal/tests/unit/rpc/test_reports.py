import base64
import copy
import datetime
import zlib

import numpy as np
import pytest

from memcanal.estimation import packed_curve
from memcanal import exception
from memcanal.rpc import reports

HOST = '4f1c2a2e-6b1f-4f5e-9a43-2b9f0e4d1c11'
VM = '9b2f1c3d-0e4a-4b5c-8d6e-7f8091a2b3c4'


def good_report():
    return {
        'host_uuid': HOST,
        'sequence': 3,
        'collected_at': '2026-11-22T09:00:00Z',
        'instances': [{
            'uuid': VM, 'project_id': 'p1', 'allocated_bytes': 2 ** 30,
            'observed_bytes': None,
            'wss': {'distinct': 2 ** 20},
            'mrc': {'exact': [[4096, 0.9], [8192, 0.5], [2 ** 20, 0.0]]},
            'guest_stats': {'references': 100.0},
            'logs': {
                'prl': {'events': 120, 'logged': 61440, 'missed': 3,
                        'handler_ns': 250000, 'vm_cpu_ns': 0},
                'pml': {'events': 2, 'logged': 1024, 'missed': 0,
                        'handler_ns': 4000, 'vm_cpu_ns': 4000}},
        }],
    }


def validate(report, max_points=256, max_instances=10):
    return reports.validate_report(report, max_points, max_instances)


def test_good_report_is_accepted_with_time_parsed():
    valid = validate(good_report())
    assert valid['collected_at'] == datetime.datetime(2026, 11, 22, 9, 0)
    assert valid['instances'] == good_report()['instances']


def test_an_older_agents_target_bytes_is_read_as_observed_bytes():
    report = good_report()
    sample = report['instances'][0]
    del sample['observed_bytes']
    sample['target_bytes'] = 2 ** 30
    valid = validate(report)['instances'][0]
    assert valid['observed_bytes'] == 2 ** 30
    assert 'target_bytes' not in valid


def mutate(path, value):
    report = good_report()
    target = report
    for key in path[:-1]:
        target = target[key]
    if value is KeyError:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return report


@pytest.mark.parametrize('path, value, code', [
    (('sequence',), 'three', 'report.malformed'),
    (('sequence',), 0, 'report.malformed'),
    (('sequence',), True, 'report.malformed'),
    (('host_uuid',), 'not-a-uuid', 'report.malformed'),
    (('collected_at',), 'yesterday', 'report.malformed'),
    (('instances',), KeyError, 'report.malformed'),
    (('extra',), 1, 'report.malformed'),
    (('instances', 0, 'allocated_bytes'), -1, 'report.malformed'),
    (('instances', 0, 'wss', 'distinct'), -4096, 'report.malformed'),
    (('instances', 0, 'wss', 'distinct'), 1.5, 'report.malformed'),
    (('instances', 0, 'wss', 'Bad Name'), 1, 'report.malformed'),
    (('instances', 0, 'mrc', 'exact', 0, 1), 1.5, 'report.malformed'),
    (('instances', 0, 'mrc', 'exact', 0, 0), -4096, 'report.malformed'),
    (('instances', 0, 'mrc', 'exact', 0, 0), True, 'report.malformed'),
    (('instances', 0, 'mrc', 'exact', 0, 0), 4096.0, 'report.malformed'),
    (('instances', 0, 'mrc', 'exact', 0, 1), '0.5', 'report.malformed'),
    (('instances', 0, 'mrc', 'exact', 0), [4096], 'report.malformed'),
    (('instances', 0, 'mrc', 'exact', 0), {'size': 4096},
     'report.malformed'),
    (('instances', 0, 'mrc', 'exact'), [], 'report.malformed'),
    (('instances', 0, 'mrc', 'exact', 1, 1), float('nan'),
     'report.not_finite'),
    (('instances', 0, 'guest_stats', 'x'), float('inf'),
     'report.not_finite'),
    (('instances', 0, 'mrc', 'exact', 1, 0), 4096, 'report.mrc_unordered'),
    (('instances', 0, 'project_id'), '', 'report.malformed'),
    (('instances', 0, 'logs', 'prl', 'missed'), -1, 'report.malformed'),
    (('instances', 0, 'logs', 'prl', 'events'), 1.5, 'report.malformed'),
    (('instances', 0, 'logs', 'prl', 'events'), True, 'report.malformed'),
    (('instances', 0, 'logs', 'pml', 'handler_ns'), '4000',
     'report.malformed'),
    (('instances', 0, 'logs', 'pml', 'vm_cpu_ns'), None,
     'report.malformed'),
    (('instances', 0, 'logs', 'prl', 'dropped'), 1, 'report.malformed'),
    (('instances', 0, 'logs', 'ept'), {'events': 1}, 'report.malformed'),
    (('instances', 0, 'logs', 'prl'), [120, 61440], 'report.malformed'),
    (('instances', 0, 'logs'), None, 'report.malformed'),
])
def test_bad_reports_are_rejected_with_a_stable_code(path, value, code):
    with pytest.raises(exception.InvalidReport) as err:
        validate(mutate(path, value))
    assert err.value.code == code


@pytest.mark.parametrize('points', [
    [[4096, 0], [8192, 1]],
    [[4096, 0.5], [8192, 0.25], [2 ** 70, 0.0]],
    [[4096, float('nan')], [8192, 0.5]],  # NaN first: min and max stop
    [[4096, 0.5], [8192, float('nan')]],
    [[4096, float('inf')]], [[4096, float('-inf')]],
    [[4096, 10 ** 400]], [[4096, -10 ** 400]],
    [[4096, 0.5], [4096, 0.4]], [[0, 0.5]], [[4096, 0.5], [2048, 0.4]],
    [(4096, 0.5)], [[4096, 0.5, 1]], [[4096]], ['ab'], [{'a': 1, 'b': 2}],
    [[4096, True]], [[True, 0.5]], [[4096.0, 0.5]], [[4096, '0.5']],
])
def test_the_fast_curve_check_agrees_with_the_explaining_loop(
        points, monkeypatch):
    fast = reports._good_curve(points)
    monkeypatch.setattr(reports, '_good_curve', lambda points: False)
    try:
        reports._check_point_list('curve', points, 256)
    except exception.InvalidReport:
        assert not fast
    else:
        assert fast


@pytest.mark.parametrize('logs', [
    KeyError,  # an agent older than the field
    {},
    {'pml': {}},
    {'prl': {'missed': 0}},
])
def test_logs_and_each_of_their_keys_are_optional(logs):
    report = mutate(('instances', 0, 'logs'), logs)
    assert validate(report)['instances'] == report['instances']


def test_oversized_mrc_is_rejected():
    report = good_report()
    report['instances'][0]['mrc']['exact'] = [
        [4096 * (i + 1), 1.0 - i / 300] for i in range(300)]
    with pytest.raises(exception.InvalidReport) as err:
        validate(report)
    assert err.value.code == 'report.mrc_too_large'
    validate(report, max_points=300)
    # The count is refused before the points are looked at.
    report['instances'][0]['mrc']['exact'] = ['junk'] * 257
    with pytest.raises(exception.InvalidReport) as err:
        validate(report)
    assert err.value.code == 'report.mrc_too_large'


def packed(points):
    return packed_curve.pack(points)


def deflated(raw):
    return base64.b64encode(zlib.compress(raw)).decode()


def test_a_packed_curve_is_accepted_and_unpacks_to_its_points():
    points = good_report()['instances'][0]['mrc']['exact']
    report = mutate(('instances', 0, 'mrc', 'exact'), packed(points))
    valid = validate(report)
    assert valid['instances'] == report['instances']
    assert packed_curve.unpack(
        valid['instances'][0]['mrc']['exact']) == points


def test_packed_curves_of_one_report_are_judged_each_on_its_own():
    # The second curve starts below where the first ends; each rises.
    report = good_report()
    report['instances'][0]['mrc'] = {
        'exact': packed([[4096, 0.9], [2 ** 30, 0.1]]),
        'shards': packed([[8192, 0.8], [2 ** 20, 0.2]])}
    validate(report)
    report['instances'][0]['mrc']['shards'] = packed(
        [[8192, 0.8], [8192, 0.2]])
    with pytest.raises(exception.InvalidReport) as err:
        validate(report)
    assert err.value.code == 'report.mrc_unordered'
    assert 'instances.0.mrc.shards' in str(err.value)


@pytest.mark.parametrize('curve, code', [
    ('not base64!', 'report.malformed'),
    (base64.b64encode(b'\x01' * 32).decode(), 'report.malformed'),
    (deflated(b'\x00' * 17), 'report.malformed'),
    (deflated(np.zeros(4, packed_curve.POINT).tobytes())[:-8],
     'report.malformed'),
    (deflated(b''), 'report.malformed'),
    (packed([[0, 0.5]]), 'report.malformed'),
    (packed([[4096, 1.5]]), 'report.malformed'),
    (packed([[4096, -0.5]]), 'report.malformed'),
    (packed([[4096, 0.5], [8192, float('nan')]]), 'report.not_finite'),
    (packed([[4096, float('inf')]]), 'report.not_finite'),
    (packed([[8192, 0.5], [4096, 0.4]]), 'report.mrc_unordered'),
    (packed([[4096, 0.5], [4096, 0.4]]), 'report.mrc_unordered'),
    (packed([[4096 * (i + 1), 0.5] for i in range(257)]),
     'report.mrc_too_large'),
    # Refused by its length, before it is decoded.
    ('A' * (packed_curve.max_text_length(256) + 4), 'report.mrc_too_large'),
    ('', 'report.malformed'),
])
def test_bad_packed_curves_are_rejected_with_a_stable_code(curve, code):
    with pytest.raises(exception.InvalidReport) as err:
        validate(mutate(('instances', 0, 'mrc', 'exact'), curve))
    assert err.value.code == code


def test_a_packed_curve_keeps_every_value_exactly():
    points = [[4096, 1 / 3], [2 ** 40, 0.1 + 0.2], [2 ** 63 + 1, 0.0]]
    assert packed_curve.unpack(packed(points)) == points


def test_too_many_and_repeated_instances_are_rejected():
    report = good_report()
    report['instances'].append(copy.deepcopy(report['instances'][0]))
    with pytest.raises(exception.InvalidReport) as err:
        validate(report)
    assert err.value.code == 'report.duplicate_instance'
    with pytest.raises(exception.InvalidReport) as err:
        validate(report, max_instances=1)
    assert err.value.code == 'report.too_many_instances'


def test_non_dict_report_is_rejected():
    with pytest.raises(exception.InvalidReport) as err:
        validate(['not', 'a', 'report'])
    assert err.value.code == 'report.malformed'


SAMPLED = [[4096, 0.9], [8192, 0.5], [2 ** 20, 0.0]]


def sampled_report():
    """A 1.7 agent's: a sampled working set and curve, with their 95 %
    intervals."""
    report = good_report()
    sample = report['instances'][0]
    sample['wss']['sampled'] = 2 ** 20
    sample['wss_bounds'] = {'sampled': [2 ** 20 - 8192, 2 ** 20 + 8192]}
    sample['mrc']['sampled'] = packed(SAMPLED)
    sample['mrc_bands'] = {'sampled': {
        'low': packed([[4096, 0.85], [8192, 0.4], [2 ** 20, 0.0]]),
        'high': packed([[4096, 0.95], [8192, 0.6], [2 ** 20, 0.02]])}}
    sample['guest_stats'].update(sampling_confidence=0.95,
                                 sampled_pages=12.0, sampling_rate=0.01)
    return report


def test_intervals_are_accepted_and_an_older_agents_report_without():
    assert validate(sampled_report())['instances'] == sampled_report()[
        'instances']
    # RPC 1.6: neither field; still accepted.
    assert 'wss_bounds' not in validate(good_report())['instances'][0]


def band(low, high, sizes=(4096, 8192, 2 ** 20)):
    return {'low': packed(list(map(list, zip(sizes, low)))),
            'high': packed(list(map(list, zip(sizes, high))))}


@pytest.mark.parametrize('path, value, code', [
    (('wss_bounds', 'sampled'), [2 ** 20 + 1, 2 ** 20], 'report.bad_interval'),
    (('wss_bounds', 'prl'), [1, 2], 'report.bad_interval'),
    (('wss_bounds', 'sampled'), [1], 'report.malformed'),
    (('wss_bounds', 'sampled'), [1, 2, 3], 'report.malformed'),
    (('wss_bounds', 'sampled'), [-1, 2], 'report.malformed'),
    (('wss_bounds', 'sampled'), [1.5, 2], 'report.malformed'),
    (('wss_bounds', 'sampled'), {'low': 1, 'high': 2}, 'report.malformed'),
    (('mrc_bands', 'sampled'), band([0.9, 0.7, 0.0], [0.95, 0.6, 0.0]),
     'report.bad_interval'),
    (('mrc_bands', 'sampled'), band([0.9, 0.5, 0.0], [0.95, 0.6, 1.5]),
     'report.bad_interval'),
    (('mrc_bands', 'sampled'), band([0.9, float('nan'), 0.0],
                                    [0.95, 0.6, 0.0]), 'report.bad_interval'),
    (('mrc_bands', 'sampled'), band([0.9, 0.5], [0.95, 0.6], (4096, 8192)),
     'report.bad_interval'),
    (('mrc_bands', 'sampled'), band([0.9, 0.5, 0.0], [0.95, 0.6, 0.0],
                                    (4096, 12288, 2 ** 20)),
     'report.bad_interval'),
    (('mrc_bands', 'shards'), band([0.9, 0.5, 0.0], [0.95, 0.6, 0.0]),
     'report.bad_interval'),
    (('mrc_bands', 'sampled', 'high'), 'not base64!', 'report.malformed'),
    (('mrc_bands', 'sampled', 'high'), KeyError, 'report.malformed'),
    (('mrc_bands', 'sampled', 'middle'), packed(SAMPLED), 'report.malformed'),
    (('mrc_bands', 'sampled', 'low'), SAMPLED, 'report.malformed'),
])
def test_bad_intervals_are_rejected_with_a_stable_code(path, value, code):
    report = sampled_report()
    target = report['instances'][0]
    for key in path[:-1]:
        target = target[key]
    if value is KeyError:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    with pytest.raises(exception.InvalidReport) as err:
        validate(report)
    assert err.value.code == code


def test_a_band_of_a_curve_sent_as_a_list_is_judged_at_its_sizes():
    report = sampled_report()
    sample = report['instances'][0]
    sample['mrc']['sampled'] = SAMPLED
    validate(report)
    sample['mrc']['sampled'] = SAMPLED[:2]
    with pytest.raises(exception.InvalidReport) as err:
        validate(report)
    assert err.value.code == 'report.bad_interval'
