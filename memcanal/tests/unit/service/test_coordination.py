"""Job leases and host shares (memcanal.service.coordination) on tooz's
file backend: one process at a time runs a job, another takes it over
once the first lets it go; the hosts are split over the live processes
and a stopped one's go to the others; without a backend every process
runs every job and serves every host."""

import time

import pytest
import tooz
from tooz.drivers import file as file_driver

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


def test_jobs_that_must_run_once_are_led_the_others_run_everywhere(
        conf, backend):
    conf.set_override('backend_url', backend, 'coordination')
    service_manager = manager.ServiceManager(conf)
    timers = dict((job.__qualname__, job)
                  for _, job in service_manager.timers())
    everywhere = ('record_service', 'send_actions', 'follow_up_actions',
                  'watch_hosts')
    for name in everywhere:
        assert timers['ServiceManager.' + name] == getattr(service_manager,
                                                           name)
    led = [name for name in timers
           if name.split('.')[1] not in everywhere]
    assert sorted(led) == sorted(
        'ServiceManager.' + name for name in (
            'mark_gone_instances', 'fail_unanswered_actions', 'optimize',
            'run_retention'))
    assert all(timers[name] != getattr(service_manager,
                                       name.split('.')[1])
               for name in led)


HOSTS = ['compute-%d' % index for index in range(60)]


def test_without_a_backend_every_process_serves_every_host():
    assert leases(None, 'a').served(HOSTS) == HOSTS


def test_hosts_are_split_over_the_live_processes(backend):
    processes = [leases(backend, name) for name in 'abc']
    try:
        shares = [set(process.served(HOSTS)) for process in processes]
        # Each host served by one process, every process some.
        assert sorted(h for share in shares for h in share) == sorted(HOSTS)
        assert all(shares)
        # A stopped process's hosts go to the others; theirs stay.
        processes[0].stop()
        after = [set(process.served(HOSTS)) for process in processes[1:]]
        assert after[0] | after[1] == set(HOSTS)
        assert not after[0] & after[1]
        assert shares[1] <= after[0] and shares[2] <= after[1]
        # It takes its share back when it comes back.
        processes[0].start()
        assert set(processes[0].served(HOSTS)) == shares[0]
        assert set(processes[1].served(HOSTS)) == shares[1]
    finally:
        for process in processes:
            process.stop()


def test_a_dead_processs_hosts_go_to_the_others_once_it_expires(tmp_path):
    # timeout=1: a member whose heartbeat stopped is gone after 1 s.
    url = 'file://%s?timeout=1' % tmp_path
    first, second = leases(url, 'a'), leases(url, 'b')
    try:
        assert len(second.served(HOSTS)) < len(HOSTS)
        # Killed: no leaving, its heartbeat just stops.
        first._coordinator.heart.stop()
        first._coordinator.heart.wait()
        first._coordinator = None
        deadline = time.monotonic() + 30
        while len(second.served(HOSTS)) < len(HOSTS):
            assert time.monotonic() < deadline
            time.sleep(0.2)
    finally:
        second.stop()


def test_an_unreachable_backend_serves_no_host():
    assert leases('file:///etc/passwd/memcanal', 'a').served(HOSTS) == []


def test_follow_up_resends_only_the_served_hosts_decisions(conf, backend):
    service_manager = manager.ServiceManager(conf)
    service_manager.leases = leases(backend, 'a')
    seen = []

    def follow_up(context, served):
        seen.extend(served([{'host': 'compute-1'}, {'host': 'compute-2'}]))
        return 0
    service_manager.dispatcher.follow_up = follow_up
    try:
        service_manager.follow_up_actions()
        # Alone in the ring: every host's.
        assert seen == [{'host': 'compute-1'}, {'host': 'compute-2'}]
    finally:
        service_manager.leases.stop()


def test_a_process_taken_for_dead_joins_again(backend):
    first, second = leases(backend, 'a'), leases(backend, 'b')
    try:
        assert len(first.served(HOSTS)) < len(HOSTS)
        # Its membership removed, as after a stall past its timeout.
        first._coordinator.leave_group(coordination.GROUP).get()
        assert second.served(HOSTS) == HOSTS
        assert len(first.served(HOSTS)) < len(HOSTS)
        assert len(second.served(HOSTS)) < len(HOSTS)
    finally:
        second.stop()
        first.stop()


def test_without_groups_the_holder_of_the_hosts_lock_serves_all(
        backend, monkeypatch):
    """MySQL's tooz driver has locks but no groups."""
    def no_groups(self, group_id):
        raise tooz.NotImplemented('not implemented')
    monkeypatch.setattr(file_driver.FileDriver, 'create_group', no_groups)
    first, second = leases(backend, 'a'), leases(backend, 'b')
    try:
        assert first.served(HOSTS) == HOSTS
        assert second.served(HOSTS) == []
        first.stop()
        assert second.served(HOSTS) == HOSTS
    finally:
        second.stop()
