import json

import pytest

from memcanal.cmd import plan


def run(capsys, tmp_path, description):
    path = tmp_path / 'plan.json'
    path.write_text(json.dumps(description))
    code = plan.main([str(path)])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if code == 0 else None), err


TABLE2 = {'delta': 0.25, 'unit_mb': 4, 'vms': [
    {'name': 'web', 'baseline_mb': 512,
     'mrc': [[64, 0.9], [256, 0.5], [280, 0.496], [452, 0.42], [512, 0.4],
             [768, 0.35], [1024, 0.3]]},
    {'name': 'search', 'baseline_mb': 512,
     'mrc': [[64, 1.0], [512, 0.5], [748, 0.32], [920, 0.03],
             [1024, 0.02]]},
    {'name': 'tpch', 'baseline_mb': 512,
     'mrc': [[64, 1.0], [300, 0.6], [336, 0.001], [512, 0.001]]}]}


def test_every_policy_is_planned(capsys, tmp_path):
    code, result, _ = run(capsys, tmp_path, TABLE2)
    assert code == 0
    assert result['total_mb'] == 1536
    assert set(result['policies']) == {
        'isolated_sharing_exact', 'isolated_sharing_greedy',
        'isolated_sharing_exhaustive', 'esx'}
    exact = result['policies']['isolated_sharing_exact']
    assert sum(exact['targets_mb'].values()) == 1536
    assert exact['targets_mb']['tpch'] == 336
    assert exact['geometric_mean'] == pytest.approx(
        result['policies']['isolated_sharing_exhaustive']['geometric_mean'])
    assert exact['predicted_miss_ratio']['web'] <= 1.25


def test_four_vms_skip_exhaustive(capsys, tmp_path):
    description = dict(TABLE2, vms=TABLE2['vms'] + [
        dict(TABLE2['vms'][0], name='web2')])
    code, result, _ = run(capsys, tmp_path, description)
    assert code == 0
    assert 'isolated_sharing_exhaustive' not in result['policies']


@pytest.mark.parametrize('description, message', [
    ({'vms': []}, 'vms'),
    ({'vms': [{'name': 'a', 'baseline_mb': 512, 'mrc': [[1, 2]]}]},
     'vms/0/mrc/0/1'),
    ({'vms': [{'name': 'a', 'mrc': [[1, 0.5]]}]}, 'baseline_mb'),
    (dict(TABLE2, vms=TABLE2['vms'] + TABLE2['vms'][:1]), 'unique'),
    (dict(TABLE2, total_mb=100), 'no allocation'),
])
def test_bad_input_exits_2(capsys, tmp_path, description, message):
    code, _, err = run(capsys, tmp_path, description)
    assert code == 2
    assert message in err


def test_not_json_exits_2(capsys, tmp_path):
    path = tmp_path / 'plan.json'
    path.write_text('{')
    assert plan.main([str(path)]) == 2
    assert plan.main([str(tmp_path / 'missing.json')]) == 2
