"""Job leases (memcanal.service.coordination) on tooz's file backend:
one process at a time runs a job, another takes it over once the first
lets it go, and without a backend every process runs every job."""

import pytest

from memcanal.service import coordination
from memcanal.service import manager


@pytest.fixture
def backend(tmp_path):
    return 'file://%s' % tmp_path


def leases(url, member):
    job_leases = coordination.JobLeases(url, member)
    job_leases.start()
    return job_leases


def test_without_a_backend_every_process_leads_every_job():
    first, second = leases(None, 'a'), leases(None, 'b')
    assert first.leads('optimize') and second.leads('optimize')


def test_one_process_at_a_time_leads_a_job(backend):
    first, second = leases(backend, 'a'), leases(backend, 'b')
    try:
        assert first.leads('optimize')
        assert not second.leads('optimize')
        # Leading is kept, tick after tick.
        assert first.leads('optimize')
        # Jobs are independent: they spread over the processes.
        assert second.leads('retention')
        assert not first.leads('retention')
    finally:
        second.stop()
        first.stop()


def test_another_process_takes_over_a_stopped_leader(backend):
    first, second = leases(backend, 'a'), leases(backend, 'b')
    try:
        assert first.leads('optimize')
        first.stop()
        assert not first.leads('optimize')
        assert second.leads('optimize')
    finally:
        second.stop()


def test_a_lock_the_backend_gave_away_is_let_go(backend, monkeypatch):
    first, second = leases(backend, 'a'), leases(backend, 'b')
    try:
        assert first.leads('optimize')

        def expired_and_taken(lock):
            # As when first stalled past the lock's expiry and second
            # took the job meanwhile.
            lock.release()
            assert second.leads('optimize')
            return False
        monkeypatch.setattr(coordination, '_still_owner', expired_and_taken)
        assert not first.leads('optimize')
    finally:
        second.stop()
        first.stop()


def test_an_unreachable_backend_leads_nothing_and_is_tried_again(backend):
    # A file backend under a file: its directory cannot be made.
    unreachable = leases('file:///etc/passwd/memcanal', 'a')
    try:
        # Started without raising; leads nothing while unreachable.
        assert not unreachable.leads('optimize')
        # Once the backend answers, the next tick connects and leads.
        unreachable.backend_url = backend
        assert unreachable.leads('optimize')
    finally:
        unreachable.stop()
    assert not unreachable.leads('optimize')


def test_guarded_jobs_run_only_where_they_lead(backend, conf):
    ran = []
    first, second = leases(backend, 'a'), leases(backend, 'b')
    try:
        jobs = [first.guard('optimize', lambda: ran.append('a')),
                second.guard('optimize', lambda: ran.append('b'))]
        for _ in range(3):
            for job in jobs:
                job()
        assert ran == ['a'] * 3
    finally:
        second.stop()
        first.stop()


def test_every_job_but_sending_is_led(conf, backend):
    conf.set_override('backend_url', backend, 'coordination')
    service_manager = manager.ServiceManager(conf)
    timers = dict((job.__qualname__, job)
                  for _, job in service_manager.timers())
    assert timers['ServiceManager.send_actions'] == (
        service_manager.send_actions)
    led = [name for name, job in timers.items()
           if job != service_manager.send_actions]
    assert sorted(led) == sorted(
        'ServiceManager.' + name for name in (
            'mark_gone_instances', 'follow_up_actions', 'watch_hosts',
            'optimize', 'run_retention'))
    assert all(timers[name] != getattr(service_manager,
                                       name.split('.')[1])
               for name in led)
