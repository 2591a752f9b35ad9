import io
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
    assert (exact['unit_mb'], exact['unallocated_mb']) == (4, 0)
    # ESX's victim keeps part of its idle memory at a 75 % tax.
    esx = result['policies']['esx']
    assert esx['active_mb'] == {'web': 1024, 'search': 920, 'tpch': 336}
    assert 336 < esx['targets_mb']['tpch'] < 512
    assert sum(esx['targets_mb'].values()) == 1536


def test_defaults_and_stdin(capsys, monkeypatch):
    description = {'vms': [
        {'name': 'a', 'baseline_mb': 100, 'mrc': [[50, 0.5], [100, 0.1]]},
        {'name': 'b', 'baseline_mb': 100.5, 'mrc': [[10, 0.0]]}]}
    monkeypatch.setattr('sys.stdin', io.StringIO(json.dumps(description)))
    assert plan.main(['-']) == 0
    result = json.loads(capsys.readouterr().out)
    assert result['total_mb'] == 200.5
    assert result['delta'] == 0.05
    exact = result['policies']['isolated_sharing_exact']
    assert sum(exact['targets_mb'].values()) + exact['unallocated_mb'] == (
        200.5)
    assert exact['predicted_miss_ratio'] == {'a': 1.0, 'b': 1.0}


def test_three_large_vms(capsys, tmp_path):
    mrc = [[1024, 0.9], [8192, 0.5], [16384, 0.2], [24576, 0.1]]
    description = {'vms': [
        {'name': name, 'baseline_mb': 16384, 'mrc': mrc, 'shares': 1}
        for name in 'abc']}
    code, result, _ = run(capsys, tmp_path, description)
    assert code == 0
    exact = result['policies']['isolated_sharing_exact']
    assert exact['unit_mb'] == 12
    assert exact['geometric_mean'] == pytest.approx(result['policies'][
        'isolated_sharing_exhaustive']['geometric_mean'], rel=1e-12)


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
    ({'vms': [{'name': 'a', 'baseline_mb': 1, 'mrc': [[1, 0.5]]}],
      'tax_rate': 1}, 'tax_rate'),
    ({'vms': [{'name': 'a', 'baseline_mb': 1, 'mrc': [[1, float('nan')]]}]},
     'finite'),
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


# A sampled VM (memcanal.tests.unit.policy.curves.SAMPLED): its 1 GiB
# working set touched once per 10 s; its faults meet 0.2 % of it per
# minute from 1400 MiB on. The other VM's misses fall with every MiB.
SAMPLED = {'unit_mb': 4, 'vms': [
    {'name': 'sampled', 'baseline_mb': 4096,
     'mrc': [[1024, 0.05], [1100, 0.01], [1200, 0.002], [1300, 0.0008],
             [1400, 0.0003], [1600, 0.0001], [1800, 0.00002]],
     'fault_rate': {'wss_mb': 1024, 'touches_per_s': 26214.4}},
    {'name': 'hungry', 'baseline_mb': 2048,
     'mrc': [[size, 0.5 - size / 20000] for size in range(2048, 6145, 4)]}]}


def test_a_sampled_vm_is_planned_down_to_its_fault_bound(capsys, tmp_path):
    code, result, _ = run(capsys, tmp_path, SAMPLED)
    assert code == 0
    assert result['fault_rate_bound'] == 0.002
    for name in ('isolated_sharing_exact', 'isolated_sharing_exhaustive'):
        planned = result['policies'][name]
        assert planned['targets_mb']['sampled'] == 1400
        assert planned['predicted_fault_rate_per_min'] == {
            'sampled': pytest.approx(0.0018)}
    assert result['policies']['esx']['active_mb']['sampled'] == 1400
    # A bound of 1 % of the working set per minute allows 1300 MiB;
    # without fault_rate the curve counts misses per access.
    lax = dict(SAMPLED, fault_rate_bound=0.01)
    code, result, _ = run(capsys, tmp_path, lax)
    assert result['policies']['isolated_sharing_exact']['targets_mb'][
        'sampled'] == 1300
    plain = dict(SAMPLED, vms=[dict(SAMPLED['vms'][0]), SAMPLED['vms'][1]])
    del plain['vms'][0]['fault_rate']
    code, result, _ = run(capsys, tmp_path, plain)
    assert 'fault_rate_bound' not in result
    assert 'predicted_fault_rate_per_min' not in result['policies']['esx']


def test_a_bad_fault_rate_is_refused(capsys, tmp_path):
    for bad in ({'wss_mb': 0, 'touches_per_s': 1}, {'wss_mb': 1},
                {'wss_mb': 1, 'touches_per_s': -1, 'x': 1}):
        description = dict(SAMPLED, vms=[dict(SAMPLED['vms'][0],
                                              fault_rate=bad)])
        code, _, err = run(capsys, tmp_path, description)
        assert code == 2 and 'fault_rate' in err
    code, _, err = run(capsys, tmp_path, dict(SAMPLED, fault_rate_bound=0))
    assert code == 2 and 'fault_rate_bound' in err
