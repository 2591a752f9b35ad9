"""memcanal-aio as a user runs it: a subprocess, its output, its API."""

import json
import os
import re
import sqlite3
import subprocess
import sys
import time

import matplotlib.image
import pytest
import requests

from memcanal.tests.functional import services

BIN = os.path.dirname(sys.executable)
ADMIN = {'X-Auth-Token': 'admin'}


def run_aio(state_dir, port, *extra, duration=8):
    """A short run on hosts of one size: estimators and storage."""
    return subprocess.Popen(
        [os.path.join(BIN, 'memcanal-aio'), '--hosts', '2', '--vms', '2',
         '--interval', '1', '--duration', str(duration), '--state-dir',
         str(state_dir), '--api-port', str(port),
         '--hot-host-memory-mb', '0', *extra],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def instances_while_running(process, port, expected):
    """Poll GET /instances until ``expected`` VMs have a latest report."""
    url = 'http://127.0.0.1:%d/instances' % port
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and process.poll() is None:
        try:
            listed = requests.get(url, headers=ADMIN, timeout=5).json()
        except requests.ConnectionError:
            listed = {'instances': []}
        if len(listed['instances']) == expected:
            return listed['instances']
        time.sleep(0.3)
    pytest.fail('the API did not list %d instances in time' % expected)


def report_with(process, port, uuid, has):
    """Poll GET /instances/{uuid} until ``has(latest report)``."""
    url = 'http://127.0.0.1:%d/instances/%s' % (port, uuid)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and process.poll() is None:
        latest = requests.get(url, headers=ADMIN,
                              timeout=5).json()['latest_report']
        if latest and has(latest):
            return latest
        time.sleep(0.3)
    pytest.fail('no such report for %s in time' % uuid)


def check_summary(output, estimated=True, vms=2):
    assert 'memcanal-aio summary: %d VMs reporting in this run' % (
        2 * vms) in output, output
    for host in ('sim-host-1', 'sim-host-2'):
        assert re.search(r'    %s +up +\d+ +\d+ +\d+ +\d+ \( *\d+%%\)' % host,
                         output), output
    rows = [line for line in output.splitlines()
            if 'simulated-project-' in line]
    assert len(rows) == 2 * vms, output
    # Every VM has every WSS, once the run was long enough for the
    # estimators to converge.
    for row in rows if estimated else ():
        assert ' - ' not in row.split('simulated-project-')[1][:44], row
    # The API is down once the summary is printed: it says how to keep
    # it up rather than what to ask it.
    assert 'curl' not in output.split('memcanal-aio summary')[1]
    assert 'without --duration' in output


def test_aio_on_embedded_defaults(tmp_path):
    port = services.free_port()
    process = run_aio(tmp_path / 'state', port)
    listed = instances_while_running(process, port, 4)
    latest = report_with(process, port, listed[0]['uuid'],
                         lambda report: 'prl' in report['wss'])
    # A tracing window lends 90 % of the VM's memory to the hypervisor
    # cache; the curve it gives, stored and served, starts where the VM's
    # own memory ended.
    traced = report_with(process, port, listed[0]['uuid'],
                         lambda report: 'hcache' in report['mrc'])
    output, _ = process.communicate(timeout=60)
    assert process.returncode == 0, output
    check_summary(output)
    assert '[' in output and 'VMs reporting 4/4' in output
    # Simulated VMs of 1 GB work on 1/64 or 1/32 of it: PRL finds it.
    assert latest['wss']['prl'] in (16 * 2 ** 20, 32 * 2 ** 20)
    curve = latest['mrc']['shards']
    assert curve[0][1] >= curve[-1][1]
    hcache_curve = traced['mrc']['hcache']
    assert hcache_curve[0][0] < traced['allocated_bytes'] // 5
    assert 'shards' in traced['mrc']
    # A second run continues on the same state with fewer VMs: those
    # its hosts no longer report leave after [service]
    # instance_gone_after (10 intervals in memcanal-aio), and the
    # summary counts only those that reported in this run.
    again = run_aio(tmp_path / 'state', services.free_port(), '--vms', '1',
                    duration=18)
    output, _ = again.communicate(timeout=60)
    assert again.returncode == 0, output
    check_summary(output, estimated=False, vms=1)
    # Only the VMs reporting in this run count, before the service marks
    # the others gone too: not the reports of the first run its agents'
    # outboxes send at start.
    reporting = re.findall(r'^\[.*VMs reporting (\d+)/2', output, re.M)
    assert reporting and reporting[-1] == '2', output
    assert max(int(count) for count in reporting) == 2, output


def test_aio_on_rabbitmq_and_mariadb(tmp_path, rabbit_url, mysql_url):
    port = services.free_port()
    # Longer than on embedded defaults: MariaDB's schema and RabbitMQ's
    # connections take seconds of a loaded machine's run first.
    process = run_aio(tmp_path / 'state', port, '--transport-url',
                      rabbit_url, '--db-url', mysql_url, duration=15)
    instances_while_running(process, port, 4)
    output, _ = process.communicate(timeout=60)
    assert process.returncode == 0, output
    check_summary(output)


V11 = dict(ADMIN, **{'OpenStack-API-Version': 'memcanal 1.1'})


def poll(process, url, has, seconds=60):
    """GET ``url`` until ``has(body)`` holds; return the body."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and process.poll() is None:
        try:
            body = requests.get(url, headers=V11, timeout=5).json()
        except requests.ConnectionError:
            body = None
        if body is not None and has(body):
            return body
        time.sleep(0.3)
    pytest.fail('%s never satisfied the test' % url)


def decide(process, base, uuid, request):
    response = requests.post('%s/decisions/%s/%s' % (base, uuid, request),
                             headers=V11, json={'reason': 'test'},
                             timeout=5)
    assert response.status_code == 200, response.text
    return response.json()


def test_aio_decisions_approve_rollback_reject(tmp_path):
    """Recommend mode: an operator approves a decision over the API, the
    agent applies it, the operator rolls it back, rejects the next."""
    port = services.free_port()
    base = 'http://127.0.0.1:%d' % port
    process = subprocess.Popen(
        [os.path.join(BIN, 'memcanal-aio'), '--hosts', '1', '--vms', '3',
         '--interval', '1', '--duration', '120', '--policy-mode',
         'recommend', '--hot-host-memory-mb', '0', '--state-dir',
         str(tmp_path / 'state'), '--api-port', str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        waiting = poll(process, base + '/decisions?state=recommended',
                       lambda body: body.get('decisions'))['decisions'][0]
        approved = decide(process, base, waiting['uuid'], 'approve')
        assert approved['events'][-1]['user_id'] == 'admin'
        url = '%s/decisions/%s' % (base, waiting['uuid'])
        applied = poll(process, url,
                       lambda body: body['state'] == 'applied')
        # A report collected before the resize may still be stored after
        # it; the next one shows the new target.
        for action in applied['actions']:
            assert action['result']['mechanism'] == 'hotplug'
            poll(process, '%s/instances/%s' % (base, action['instance_uuid']),
                 lambda body, want=action['target_bytes']:
                 body['target_bytes'] == want)
        decide(process, base, waiting['uuid'], 'rollback')
        rolled = poll(process, url,
                      lambda body: body['state'] == 'rolled_back')
        for action in rolled['actions']:
            if action['kind'] == 'restore':
                poll(process, '%s/instances/%s' % (
                    base, action['instance_uuid']),
                    lambda body, want=action['target_bytes']:
                    body['target_bytes'] == want)
        newer = poll(process, base + '/decisions?state=recommended',
                     lambda body: body.get('decisions'))['decisions'][0]
        assert decide(process, base, newer['uuid'], 'reject')[
            'state'] == 'rejected'
        again = requests.post(base + '/decisions/%s/approve' % newer[
            'uuid'], headers=V11, timeout=5)
        assert again.status_code == 409
    finally:
        process.terminate()
        output, _ = process.communicate(timeout=60)
    assert 'decisions in this run:' in output


def check_applied_moves(database):
    """Each applied move starts where the VM's last applied one ended
    (a report collected before a resize, stored after it, once rewrote
    the target and the next decision repeated the same moves), and no
    applied decision repeats the moves of the one before."""
    with sqlite3.connect(database) as connection:
        rows = connection.execute(
            "SELECT d.id, i.uuid, i.allocated_bytes, a.params FROM actions a"
            " JOIN decisions d ON a.decision_id = d.id"
            " JOIN instances i ON a.instance_id = i.id"
            " WHERE a.state = 'applied' AND a.kind = 'set_target'"
            " ORDER BY d.id, a.id").fetchall()
    assert rows
    last_target, moves = {}, {}
    for decision_id, uuid, allocated, params in rows:
        params = json.loads(params)
        assert params['previous_bytes'] == last_target.get(uuid, allocated)
        last_target[uuid] = params['target_bytes']
        moves.setdefault(decision_id, []).append(
            (uuid, params['previous_bytes'], params['target_bytes']))
    ordered = [moves[key] for key in sorted(moves)]
    assert all(a != b for a, b in zip(ordered, ordered[1:])), ordered


def applied_kinds(body):
    return {d['kind'] for d in body['decisions']}


def test_aio_default_run(tmp_path):
    """The README's first run, all defaults: sim-host-1 runs hot. The
    service pages cold memory of its VMs out to sim-host-2, migrates a
    VM there and resizes VMs, each decision applied at once; the summary
    shows the resize's predicted miss ratio beside the one measured
    since, who lends to whom, and the plots. Stopped by SIGTERM once the
    API shows all three applied and a resize measured."""
    port = services.free_port()
    base = 'http://127.0.0.1:%d' % port
    state = tmp_path / 'state'
    process = subprocess.Popen(
        [os.path.join(BIN, 'memcanal-aio'), '--state-dir', str(state),
         '--api-port', str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        poll(process, base + '/decisions?state=applied',
             lambda body: applied_kinds(body) >= {
                 'memory_targets', 'migration', 'pooling'}, seconds=240)
        # Two more reports of every host: one collected wholly after
        # the resize shows its effect.
        sequences = {h['name']: h['last_sequence'] for h in poll(
            process, base + '/hosts', lambda body: True)['hosts']}
        poll(process, base + '/hosts', lambda body: all(
            h['last_sequence'] >= sequences[h['name']] + 2
            for h in body['hosts']))
    finally:
        process.terminate()
        output, _ = process.communicate(timeout=120)
    assert process.returncode == 0, output
    assert 'dashboard: %s/dashboard' % base in output, output
    assert 'VMs reporting 8/8' in output, output
    assert 'memcanal-aio summary: 8 VMs reporting in this run' in output
    assert re.search(r'decision \w+ \w+: resize on sim-host-\d \(isolated_'
                     r'sharing\): \w+ \d+ -> \d+ MiB, predicted miss ratio '
                     r'\d\.\d+', output), output
    measured = re.findall(
        r'\d+ -> +\d+ MiB  miss ratio predicted (\d\.\d+) \(\w+ curve\), '
        r'measured (\d\.\d+) over (\d+) reports', output)
    assert measured, output
    moved = set(re.findall(
        r'migrated: migrate (\w+) from sim-host-1 to sim-host-2', output))
    assert moved, output
    pooled = re.findall(
        r'pooled: sim-host-2 lends (\d+) MiB to (\S+) on sim-host-1, which '
        r'keeps (\d+) of its (\d+) MiB resident', output)
    assert pooled, output
    assert all(int(kept) + int(mib) == int(memory)
               for mib, _vm, kept, memory in pooled)
    lent = sum(int(mib) for mib, _vm, _kept, _memory in pooled)
    memory_map = re.search(
        r'sim-host-1 +up +\d+ +\d+ +\d+ +\d+ \( *\d+%\) +0 +(\d+)  \S+\n'
        r' +sim-host-2 +up +\d+ +\d+ +\d+ +\d+ \( *\d+%\) +(\d+) +0  \S+\n',
        output)
    assert memory_map.group(1, 2) == (str(lent), str(lent)), output
    plots = re.search(r'^  plots: (.*)$', output, re.M).group(1).split(', ')
    assert [os.path.basename(p) for p in plots] == [
        'hosts.png', 'vms.png', 'curves.png'], output
    for path in plots:
        with open(path, 'rb') as png:
            assert png.read(8) == b'\x89PNG\r\n\x1a\n'
        assert matplotlib.image.imread(path).shape[0] > 100
    assert 'without --duration' in output
    # The last line: the resizes' predictions against what followed.
    assert re.match(r'fidelity: (-|\d\.\d{3} mean )',
                    output.strip().splitlines()[-1]), output
    check_applied_moves(state / 'memcanal.sqlite')
