"""Job leases (memcanal.service.coordination) on the real backends an
operator names in [coordination] backend_url: Redis, and MariaDB through
tooz's mysql driver. One process leads a job; when it dies (its lock
expires, or its connection closes) another takes it over."""

import signal
import subprocess
import sys
import time
import uuid

import pytest

from memcanal.service import coordination
from memcanal.tests.functional import services


@pytest.fixture(params=['redis', 'mysql'])
def backend_url(request):
    if request.param == 'redis':
        yield '%s?timeout=2&namespace=memcanal-test-%s' % (
            services.require_redis(), uuid.uuid4().hex[:8])
    else:
        services.require('127.0.0.1', 3306, 'MariaDB')
        yield services.MYSQL_ADMIN_URL.replace('mysql+pymysql://',
                                               'mysql://') + 'mysql'


LEADER = """
import sys, time
from memcanal.service import coordination
leases = coordination.JobLeases(sys.argv[1], 'controller-1')
leases.start()
print('leading' if leases.leads(sys.argv[2]) else 'not leading',
      flush=True)
time.sleep(600)
"""


def test_one_leader_and_a_takeover_after_a_kill(backend_url):
    job = 'test-%s' % uuid.uuid4().hex[:8]
    leader = subprocess.Popen([sys.executable, '-c', LEADER, backend_url,
                               job], stdout=subprocess.PIPE, text=True)
    second = coordination.JobLeases(backend_url, 'controller-2')
    second.start()
    try:
        assert leader.stdout.readline().strip() == 'leading'
        assert not second.leads(job)
        leader.send_signal(signal.SIGKILL)
        leader.wait()
        killed = time.monotonic()
        services.wait_for(lambda: second.leads(job), timeout=30,
                          what='another process to take the job over')
        print('taken over %.1f s after the kill' % (
            time.monotonic() - killed))
    finally:
        if leader.poll() is None:
            leader.kill()
            leader.wait()
        second.stop()
