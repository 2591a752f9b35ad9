import pytest

from memcanal.estimation import observer
from memcanal.estimation import workloads


@pytest.mark.parametrize('order, pml_sees_it', [('RWRW', True),
                                                ('RRWW', False),
                                                ('WWRR', True)])
def test_replay_of_the_synthetic_app(order, pml_sees_it):
    settings = observer.Settings(tau=5, omega_s=20, mu_s=10, esx_period_s=10)
    app = workloads.PrlSyntheticApp(2000, order, pass_seconds=1.0,
                                    phase_seconds=30.0, base_page=500)
    vm = observer.VmObserver(8000, settings)
    timeline = observer.replay(app.run_for(120), vm, until_converged=True)
    first_prl = next(entry for entry in timeline if 'prl' in entry)
    assert first_prl['prl'] == 2000 * 4096
    first_pml = next(entry for entry in timeline if 'pml' in entry)
    assert (first_pml['pml'] == 2000 * 4096) == pml_sees_it
    assert timeline[-1]['time_s'] <= 120
    assert vm.log_stats()['prl']['events'] > 0


def test_write_then_work_fools_pml_not_prl():
    settings = observer.Settings(tau=5, omega_s=20, mu_s=10)
    vm = observer.VmObserver(
        4000, settings)
    timeline = observer.replay(
        workloads.WriteThenWork(2000, 500, pass_seconds=1.0).run_for(90), vm,
        until_converged=True)
    first = {name: next(e[name] for e in timeline if name in e)
             for name in ('prl', 'pml')}
    assert first == {'prl': 500 * 4096, 'pml': 2000 * 4096}
