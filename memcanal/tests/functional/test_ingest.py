"""Several service processes on one topic, storing into MariaDB and
PostgreSQL: every report stored once, none lost, no deadlock.

Runs benchmarks/ingest.py in its reduced mode with every report cast
twice, so the two processes race each other to store the same (host,
sequence). The benchmark counts the rows, checks that none is there twice
and that the services' counters agree (stored = rows, duplicate = the
second copies, nothing failed or rejected), and exits 1 otherwise.
"""

import os
import subprocess
import sys

from memcanal.tests.functional import services

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))


def test_two_service_processes_store_every_report_once(rabbit_url):
    services.require('127.0.0.1', 3306, 'MariaDB')
    services.require('127.0.0.1', 5432, 'PostgreSQL')
    result = subprocess.run(
        [sys.executable, os.path.join(ROOT, 'benchmarks', 'ingest.py'),
         '--reduced', '--redeliver', '--processes', '2',
         '--databases', 'mysql,postgresql', '--transport-url', rabbit_url,
         '--mysql-url', services.MYSQL_ADMIN_URL,
         '--postgresql-url', services.POSTGRES_ADMIN_URL],
        capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    rows = [line.split() for line in result.stdout.splitlines()
            if line.startswith(('mysql ', 'postgresql '))
            and any(cell.startswith('stored=') for cell in line.split())]
    assert [row[:2] for row in rows] == [['mysql', '2'],
                                         ['postgresql', '2']]
    for row in rows:
        assert 'stored=192' in row and 'duplicate=192' in row
        assert 'failed=0' in row and 'rejected=0' in row
    assert 'FAILED' not in result.stdout
