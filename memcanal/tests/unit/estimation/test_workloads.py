import numpy as np
import pytest

from memcanal.estimation import workloads


def test_rwrw_reads_then_writes_each_page_in_turn():
    app = workloads.PrlSyntheticApp(3, 'RWRW')
    trace = app.take(8)
    assert trace.pages.tolist() == [0, 0, 1, 1, 2, 2, 0, 0]
    assert trace.writes.tolist() == [False, True] * 4
    assert app.working_set_pages == 3


@pytest.mark.parametrize('order, first_phase_writes', [('RRWW', False),
                                                       ('WWRR', True)])
def test_phase_orders_alternate_whole_passes(order, first_phase_writes):
    # Two passes per phase.
    app = workloads.PrlSyntheticApp(4, order, pass_seconds=1.0,
                                    phase_seconds=2.0)
    trace = app.take(20)
    assert trace.pages.tolist() == list(range(4)) * 5
    phases = trace.writes.reshape(5, 4)
    assert phases[:, 0].tolist() == [first_phase_writes] * 2 + [
        not first_phase_writes] * 2 + [first_phase_writes]
    assert (phases == phases[:, :1]).all()


def test_random_order_has_the_write_intensity():
    app = workloads.PrlSyntheticApp(1000, 'random', write_intensity=0.3,
                                    rng=np.random.default_rng(1))
    trace = app.take(100_000)
    assert 0.28 < trace.writes.mean() < 0.32


def test_times_follow_the_pass_rate_and_continue_across_calls():
    app = workloads.PrlSyntheticApp(1000, 'RRWW', pass_seconds=2.0)
    first, second = app.take(1500), app.take(500)
    assert app.reference_ns == 2_000_000
    assert first.times[-1] + app.reference_ns == second.times[0]
    assert second.times[-1] == 1999 * 2_000_000
    assert len(app.run_for(10.0)) == 5000 - 2000


def test_write_then_work_writes_everything_once_then_works_on_part():
    workload = workloads.WriteThenWork(10, 3, base_page=100)
    trace = workload.take(16)
    assert trace.pages.tolist() == list(range(100, 110)) + [
        100, 100, 101, 101, 102, 102]
    assert trace.writes[:10].all()
    assert workload.working_set_pages == 3


@pytest.mark.parametrize('pattern', workloads.FILE_PATTERNS)
def test_file_server_reads_whole_files(pattern):
    server = workloads.FileServer(pattern, files=50, file_mb=1,
                                  write_ratio=0.5,
                                  rng=np.random.default_rng(2))
    trace = server.take(256 * 400)
    files = trace.pages.reshape(400, 256) // 256
    offsets = trace.pages.reshape(400, 256) % 256
    assert (files == files[:, :1]).all()
    assert (offsets == np.arange(256)).all()
    writes = trace.writes.reshape(400, 256)
    assert (writes == writes[:, :1]).all()
    assert 0.4 < writes[:, 0].mean() < 0.6
    assert server.working_set_pages == 50 * 256


def test_file_server_popularity_by_pattern():
    def counts(pattern):
        server = workloads.FileServer(pattern, files=100, file_mb=1,
                                      rng=np.random.default_rng(3))
        files, _ = server.requests(20_000)
        return np.bincount(files, minlength=100)
    assert counts('sequential').tolist() == [200] * 100
    popular = counts('class')
    assert 8 < popular[:10].mean() / popular[10:].mean() < 12
    zipf = counts('zipf')
    assert 1.6 < zipf[0] / zipf[1] < 2.4


def test_zipf_pages_is_bounded_and_skewed():
    pages = workloads.zipf_pages(200_000, 1000, 1.0,
                                 np.random.default_rng(4))
    assert pages.min() == 0 and pages.max() < 1000
    counts = np.bincount(pages)
    assert 1.8 < counts[0] / counts[1] < 2.2
    uniform = workloads.uniform_pages(1000, 10, np.random.default_rng(5))
    assert set(uniform.tolist()) == set(range(10))


@pytest.mark.parametrize('kwargs', [
    dict(size_pages=0), dict(size_pages=5, order='XYZ'),
    dict(size_pages=5, write_intensity=1.5), dict(size_pages=5,
                                                  pass_seconds=0)])
def test_synthetic_app_rejects_impossible_shapes(kwargs):
    with pytest.raises(ValueError):
        workloads.PrlSyntheticApp(**kwargs)


def test_other_workloads_reject_impossible_shapes():
    with pytest.raises(ValueError):
        workloads.WriteThenWork(3, 4)
    with pytest.raises(ValueError):
        workloads.FileServer('bogus')
    with pytest.raises(ValueError):
        workloads.FileServer('zipf', write_ratio=2)
