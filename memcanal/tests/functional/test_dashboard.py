"""The dashboard in a real browser: headless Chromium through chromedriver.

The API serves the page on a seeded SQLite database, as in test_api.py;
the page must draw the hosts' memory map, the selected VM's working set
over time and its miss-ratio curve with the sizes it has and would get,
approve a pending decision and enable a memory server. Names the API
returns are shown as text,
never markup; a refused token, an API answering errors or not at all and
an approval another operator made first are shown on the page.
Screenshots go to the CI's artefacts directory, to be looked at.
"""

import datetime
import json
import math
import os
import pathlib

from oslo_utils import timeutils
import pytest
from selenium.common import exceptions
from selenium import webdriver
from selenium.webdriver.chrome import service as chrome_service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support import ui

from memcanal.api import deploy
from memcanal.api import errors
from memcanal import context
from memcanal.db import api as db_api
from memcanal.db import decisions as decisions_db
from memcanal.db import pooling as pooling_db
from memcanal.db import transitions
from memcanal.estimation import packed_curve
from memcanal.rpc import reports
from memcanal.tests import fixtures as memcanal_fixtures
from memcanal.tests.functional import services
from memcanal.tests.functional import test_api
from memcanal.tests.unit.api import data
from memcanal.tests.unit.db import test_cross_host_decisions as cross

CHROMIUM = '/usr/bin/chromium'
CHROMEDRIVER = '/usr/bin/chromedriver'
# Waits for the page: it refreshes every 5 s, so two refreshes and more.
WAIT = 20
GIB = data.GIB
TOP = pathlib.Path(__file__).resolve().parents[3]

# Markup where the API returns free text: a host's name, a flavor's, a
# policy's, a decision's rejection reason, an error's detail. The page
# must show it as text; as markup it would add an <img> element.
HOSTILE = '<img src=x onerror=window.__xss=1>'
# compute-1 runs VM_A, VM_B (the pending decision shrinks it, and leaves
# VM_A as it is) and VM_C (paged: 2 GiB of it is lent by compute-2's
# memory server, which an operator enabled); compute-2 runs VM_D; the
# host HOSTILE runs VM_E, of flavor HOSTILE, rejected a decision of
# policy HOSTILE and registered a memory server, not enabled yet.
VM_A = '10000000-0000-4000-8000-00000000000a'
VM_B = '20000000-0000-4000-8000-00000000000b'
VM_C = '30000000-0000-4000-8000-00000000000c'
VM_D = '40000000-0000-4000-8000-00000000000d'
VM_E = '50000000-0000-4000-8000-00000000000e'
MEMORY = {VM_A: 4 * GIB, VM_B: 4 * GIB, VM_C: 8 * GIB, VM_D: 8 * GIB,
          VM_E: 2 * GIB}
HOSTS_OF = {'compute-1': [VM_A, VM_B, VM_C], 'compute-2': [VM_D],
            HOSTILE: [VM_E]}
# Each estimator's share of the VM's working set; the sampled one's
# comes with its 95 % interval (RPC 1.7), as does its curve.
ESTIMATORS = {'prl': 1.0, 'pml': 0.93, 'esx': 0.8, 'sampled': 0.97}
CURVES = ('hcache', 'sampled', 'shards')
SAMPLED_SPREAD = 0.1
REPORTS = 8
LENT = 2 * GIB
SERVERS = {'compute-2': '127.0.0.1:7400', HOSTILE: '127.0.0.1:7401'}
PENDING = {VM_B: 3 * GIB}
POLICY_TARGETS = {VM_A: MEMORY[VM_A], VM_B: PENDING[VM_B]}


def artifacts_dir():
    path = pathlib.Path(os.environ.get('MEMCANAL_ARTIFACTS_DIR')
                        or TOP / 'artifacts')
    path.mkdir(parents=True, exist_ok=True)
    return path


def _working_set(uuid, sequence):
    """A working set between a quarter and a half of the VM's memory,
    moving over time, different for every VM."""
    phase = int(uuid[0]) + sequence / 2
    return MEMORY[uuid] * (0.35 + 0.1 * math.sin(phase))


def _curve(wss, scale):
    """A miss-ratio curve falling past ``wss``, 24 points."""
    sizes = [int(wss * 2 * k / 24) for k in range(1, 25)]
    return [[size, 0.9 * math.exp(-scale * size / wss)] for size in sizes]


def _sample(uuid, sequence):
    wss = _working_set(uuid, sequence)
    flavor = 'm1.large' if MEMORY[uuid] > 4 * GIB else 'm1.medium'
    return {'uuid': uuid, 'project_id': data.PROJECT_A,
            'allocated_bytes': MEMORY[uuid], 'observed_bytes': None,
            'flavor': HOSTILE if uuid == VM_E else flavor,
            'wss': {name: int(wss * share)
                    for name, share in ESTIMATORS.items()},
            'wss_bounds': {'sampled': [
                int(wss * 0.97 * (1 - SAMPLED_SPREAD)),
                int(wss * 0.97 * (1 + SAMPLED_SPREAD))]},
            'mrc': {'hcache': _curve(wss, 3.0), 'shards': _curve(wss, 2.4),
                    'sampled': _curve(wss, 2.7)},
            'mrc_bands': {'sampled': {
                edge: packed_curve.pack(
                    [[size, min(1.0, max(0.0, ratio + sign * 0.05))]
                     for size, ratio in _curve(wss, 2.7)])
                for edge, sign in (('low', -1), ('high', 1))}},
            'guest_stats': {}}


def seed():
    """The cloud above, through the service's own paths; returns the
    pending decision and {host name: uuid}."""
    ctx = context.get_admin_context()
    hosts = {'compute-1': db_api.register_host(
                 ctx, 'compute-1', 64 * GIB, 2 * GIB, 30.0)['uuid'],
             'compute-2': db_api.register_host(
                 ctx, 'compute-2', 32 * GIB, GIB, 30.0)['uuid'],
             HOSTILE: db_api.register_host(
                 ctx, HOSTILE, 16 * GIB, GIB, 30.0)['uuid']}
    now = timeutils.utcnow()
    for sequence in range(1, REPORTS + 1):
        collected = now - datetime.timedelta(
            seconds=30 * (REPORTS - sequence))
        for name, uuid in hosts.items():
            report = {'host_uuid': uuid, 'sequence': sequence,
                      'collected_at': collected.strftime(
                          '%Y-%m-%dT%H:%M:%SZ'),
                      'instances': [_sample(vm, sequence)
                                    for vm in HOSTS_OF[name]]}
            if name != 'compute-1':
                report['memserver'] = {'address': SERVERS[name],
                                       'capacity_bytes': 16 * GIB,
                                       'used_bytes': 0}
            assert db_api.store_report(ctx, reports.validate_report(
                report, max_mrc_points=100, max_instances=10))
    for server in pooling_db.list_memory_servers(ctx):
        if server['host_name'] == 'compute-2':
            pooling_db.set_enabled(ctx, server['uuid'], True)
    for name in ('compute-1', 'compute-2'):
        pooling_db.set_admitted(ctx, hosts[name], True)
    rejected = _memory_targets(ctx, hosts[HOSTILE], HOSTILE,
                               {VM_E: GIB})
    transitions.request_transition(ctx, rejected['uuid'], 'reject',
                                   reason=HOSTILE)
    cross.answer(ctx, decisions_db.create_pooling_decision(
        ctx, VM_C, MEMORY[VM_C] - LENT, hosts['compute-2'], LENT,
        'pooling', 'auto', {}, {}))
    decision = _memory_targets(ctx, hosts['compute-1'], 'isolated_sharing',
                               PENDING, POLICY_TARGETS)
    return decision, hosts


def _memory_targets(ctx, host_uuid, policy, changes, targets=None):
    """A pending memory_targets decision resizing ``changes`` {VM: bytes}
    (and keeping the rest of ``targets``)."""
    return decisions_db.create_decision(
        ctx, host_uuid, 'memory_targets', policy, 'recommend',
        {'free_bytes': 0},
        {'policy': {'policy': policy, 'geometric_mean': 0.91},
         'instances': {uuid: {'target_bytes': target,
                              'policy_target_bytes': target,
                              'curve': 'hcache',
                              'predicted_miss_ratio': 0.04,
                              'predicted_relative_miss_ratio': 0.9,
                              'guardrails': []}
                       for uuid, target in (targets or changes).items()}},
        [{'instance_uuid': uuid, 'target_bytes': target,
          'previous_bytes': MEMORY[uuid], 'mechanism': 'balloon'}
         for uuid, target in changes.items()])


class Faults:
    """The API, or while ``status`` is set, an error of that status on
    every path but the dashboard's, as a failing API or a proxy would."""

    def __init__(self, application):
        self.application = application
        self.status = None

    def __call__(self, environ, start_response):
        if self.status is None or environ['PATH_INFO'].startswith(
                '/dashboard'):
            return self.application(environ, start_response)
        body = json.dumps({'errors': [{
            'status': self.status, 'code': 'memcanal.test.fault',
            'title': 'Fault', 'detail': HOSTILE}]}).encode()
        start_response('%d Fault' % self.status,
                       [('Content-Type', 'application/json'),
                        ('Content-Length', str(len(body)))])
        return [body]


@pytest.fixture(scope='module')
def dashboard(tmp_path_factory):
    """(page URL, pending decision, Faults) of the API on a seeded SQLite
    file."""
    url = 'sqlite:///%s' % (tmp_path_factory.mktemp('dashboard')
                            / 'memcanal.sqlite')
    with data.using(memcanal_fixtures.ConfFixture('noauth2')) as fixture:
        fixture.conf.set_override('connection', url, 'database')
        with data.using(memcanal_fixtures.Database(url, migrate=True)):
            decision, hosts = seed()
            faults = Faults(deploy.loadapp(fixture.conf))
            with test_api.serving(faults) as base:
                yield base + '/dashboard', decision, faults, hosts


@pytest.fixture(scope='module')
def browser():
    for path in (CHROMIUM, CHROMEDRIVER):
        if not os.access(path, os.X_OK):
            services.missing('%s is not installed (tools/install-chromium'
                             '.sh)' % path)
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    # The page's console, for its script's errors.
    options.set_capability('goog:loggingPrefs', {'browser': 'ALL'})
    for argument in ('--headless=new', '--no-sandbox',
                     '--disable-dev-shm-usage', '--window-size=1400,1000'):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=chrome_service.Service(CHROMEDRIVER),
                              options=options)
    yield driver
    driver.quit()


def wait_for(driver, condition):
    return ui.WebDriverWait(driver, WAIT).until(condition)


def elements(driver, css):
    return driver.find_elements(By.CSS_SELECTOR, css)


def screenshot(driver, name):
    """The whole page as ``name``.png in the artefacts directory."""
    height = driver.execute_script(
        'return document.documentElement.scrollHeight')
    driver.set_window_size(1400, height + 140)
    path = artifacts_dir() / ('dashboard-%s.png' % name)
    assert driver.save_screenshot(str(path))
    return path


def attributes(driver, css, name):
    return sorted(e.get_attribute(name) for e in elements(driver, css))


@pytest.fixture(scope='module')
def page(browser, dashboard):
    """The dashboard loaded, once its host map and VM charts are drawn."""
    url, decision, _faults, _hosts = dashboard
    browser.get(url)
    wait_for(browser, lambda d: len(elements(d, '#host-map g.host')) == 3
             and elements(d, '#mrc-chart path.series'))
    return browser, decision


def test_host_map(page):
    driver, _decision = page
    assert attributes(driver, '#host-map g.host', 'data-host') == [
        HOSTILE, 'compute-1', 'compute-2']
    borrower = '#host-map g.host[data-host="compute-1"] '
    lender = '#host-map g.host[data-host="compute-2"] '
    assert attributes(driver, borrower + 'rect.seg-borrowed',
                      'data-bytes') == [str(LENT)]
    assert attributes(driver, lender + 'rect.seg-lent',
                      'data-bytes') == [str(LENT)]
    assert elements(driver, borrower + 'rect.seg-lent') == []
    # compute-1's VMs keep 14 GiB of their 16 resident, some of it idle.
    assert sum(int(b) for b in attributes(
        driver, borrower + 'rect.seg-demand, ' + borrower + 'rect.seg-idle',
        'data-bytes')) == 14 * GIB
    assert len(elements(driver, '#host-map g.host line.capacity')) == 3
    assert 'up · 3 VMs' in driver.find_element(
        By.CSS_SELECTOR, borrower).text


def test_vm_charts_and_pending_decision(page):
    driver, decision = page
    # The first VM a decision waits to resize is selected.
    assert driver.find_element(By.ID, 'vm-select').get_attribute(
        'value') == VM_B
    assert attributes(driver, '#wss-chart path.series', 'data-series') == \
        sorted(ESTIMATORS)
    assert attributes(driver, '#mrc-chart path.series', 'data-series') == \
        sorted(CURVES)
    # The sampled estimates' 95 % intervals, shaded under their lines.
    assert attributes(driver, '#wss-chart path.band', 'data-band') == [
        'sampled']
    assert attributes(driver, '#mrc-chart path.band', 'data-band') == [
        'sampled']
    assert 'sampled (95 % band)' in driver.find_element(
        By.ID, 'mrc-chart').text
    # Eight reports, a point each, on each estimator's line.
    assert len(elements(driver, '#wss-chart circle')) == \
        REPORTS * len(ESTIMATORS)
    assert attributes(driver, '#mrc-chart line.marker-current',
                      'data-bytes') == [str(MEMORY[VM_B])]
    assert attributes(driver, '#mrc-chart line.marker-pending',
                      'data-bytes') == [str(PENDING[VM_B])]
    [row] = elements(driver, '#decision-list tr.decision')
    assert row.get_attribute('data-uuid') == decision['uuid']
    assert 'memory_targets' in row.text and 'compute-1' in row.text
    # Only the VMs it changes.
    assert 'VM 20000000 (m1.medium): 4.00 GiB → 3.00 GiB (−1.00 GiB)' \
        in row.text
    assert 'VM 10000000' not in row.text
    screenshot(driver, 'overview')


def test_paged_vm_shows_its_resident_target(page):
    driver, _decision = page
    ui.Select(driver.find_element(By.ID, 'vm-select')).select_by_value(VM_C)
    wait_for(driver, expected_conditions.presence_of_element_located(
        (By.CSS_SELECTOR, '#mrc-chart svg[data-vm="%s"]' % VM_C)))
    assert attributes(driver, '#mrc-chart line.marker-resident',
                      'data-bytes') == [str(MEMORY[VM_C] - LENT)]
    assert elements(driver, '#mrc-chart line.marker-pending') == []
    screenshot(driver, 'paged-vm')


def test_approve(page):
    driver, decision = page
    driver.find_element(
        By.CSS_SELECTOR, 'tr.decision[data-uuid="%s"] button.approve'
        % decision['uuid']).click()
    result = wait_for(
        driver, expected_conditions.visibility_of_element_located(
            (By.CSS_SELECTOR, '#decision-result.ok')))
    assert 'Approved memory_targets decision %s' % decision['uuid'][:8] \
        in result.text
    stored = decisions_db.get_decision(context.get_admin_context(),
                                       decision['uuid'])
    assert stored['state'] in ('approved', 'applied')
    assert stored['events'][-1]['user_id'] == 'admin'
    wait_for(driver, lambda d: not elements(d, 'tr.decision') and elements(
        d, 'tr.recent[data-uuid="%s"][data-state="%s"]'
        % (decision['uuid'], stored['state'])))
    assert 'No decision waits' in driver.find_element(
        By.ID, 'decision-list').text
    screenshot(driver, 'approved')


def test_memory_servers_are_enabled_by_the_operator(page):
    driver, _decision = page
    rows = elements(driver, '#server-list tr.server')
    assert [(row.get_attribute('data-enabled'),
             row.find_element(By.CSS_SELECTOR, 'td.host').get_attribute(
                 'title')) for row in rows] == [
        ('false', HOSTILE), ('true', 'compute-2')]
    fresh = rows[0].get_attribute('data-uuid')
    assert 'disabled' in rows[0].text and '127.0.0.1:7401' in rows[0].text
    rows[0].find_element(By.CSS_SELECTOR, 'button.approve').click()
    result = wait_for(
        driver, expected_conditions.visibility_of_element_located(
            (By.CSS_SELECTOR, '#server-result.ok')))
    assert result.text == 'Enabled the memory server of %s (127.0.0.1:7401).' \
        % HOSTILE
    assert {server['uuid']: server['enabled']
            for server in pooling_db.list_memory_servers(
                context.get_admin_context())}[fresh] is True
    wait_for(driver, lambda d: elements(
        d, 'tr.server[data-uuid="%s"][data-enabled="true"] button.reject'
        % fresh))
    screenshot(driver, 'memory-servers')
    no_markup_ran(driver)


def test_hosts_are_admitted_by_the_operator(page):
    driver, _decision = page
    # Read in one script: the page's refresh renders the rows anew, and
    # an element found before it is stale after (CI).
    rows = driver.execute_script(
        'return Array.from(document.querySelectorAll('
        '"#admission-list tr.admission")).map(function (row) {'
        ' return [row.dataset.admitted, row.querySelector("td.host").title,'
        ' row.dataset.uuid, row.textContent]; });')
    assert [(admitted, title) for admitted, title, _uuid, _text in rows] == [
        ('false', HOSTILE), ('true', 'compute-1'), ('true', 'compute-2')]
    fresh = rows[0][2]
    assert 'not admitted' in rows[0][3]
    wait_for(driver, lambda d: click(
        d, 'tr.admission[data-uuid="%s"] button.approve' % fresh))
    result = wait_for(
        driver, expected_conditions.visibility_of_element_located(
            (By.CSS_SELECTOR, '#admission-result.ok')))
    assert result.text == 'Admitted %s to memory pooling.' % HOSTILE
    assert db_api.get_host(context.get_admin_context(),
                           fresh)['pooling_admitted'] is True
    wait_for(driver, lambda d: elements(
        d, 'tr.admission[data-uuid="%s"][data-admitted="true"] '
        'button.reject' % fresh))
    screenshot(driver, 'pooling-hosts')
    no_markup_ran(driver)


def click(driver, css):
    """Click the element of ``css``; False if the page's refresh
    replaced it between finding and clicking (wait_for tries again)."""
    try:
        driver.find_element(By.CSS_SELECTOR, css).click()
    except exceptions.StaleElementReferenceException:
        return False
    return True


def no_markup_ran(driver):
    """Nothing of HOSTILE became an element or ran."""
    assert driver.execute_script(
        'return document.querySelectorAll("img").length') == 0
    assert driver.execute_script('return window.__xss') is None


def test_names_are_text(page):
    driver, _decision = page
    host = driver.find_element(
        By.CSS_SELECTOR, '#host-map g.host:first-of-type')
    assert host.get_attribute('data-host') == HOSTILE
    # Cut to fit beside its bar, whole in its tooltip.
    label = host.find_element(By.CSS_SELECTOR, 'text')
    assert label.find_element(By.CSS_SELECTOR, 'title').get_attribute(
        'textContent') == HOSTILE
    assert label.get_attribute('textContent') == HOSTILE[:16] + '…' \
        + HOSTILE
    vm = next(o for o in ui.Select(driver.find_element(
        By.ID, 'vm-select')).options if o.get_attribute('value') == VM_E)
    assert vm.text.startswith('VM 50000000 (%s) on %s' % (HOSTILE, HOSTILE))
    [rejected] = [row for row in elements(driver, 'tr.recent')
                  if row.get_attribute('data-state') == 'rejected']
    assert HOSTILE in rejected.text
    no_markup_ran(driver)


def test_no_script_errors(page):
    driver, _decision = page
    status = driver.find_element(By.ID, 'status')
    assert 'error' not in status.get_attribute('class')
    assert status.text.startswith('updated ')
    assert [entry['message'] for entry in driver.get_log('browser')
            if entry['level'] == 'SEVERE'] == []


# The rest make the API fail: the console then holds the failed requests.

def refresh_now(driver, token=None):
    """Set the Token field (when given) and have the page read the API,
    as the operator changing the token does."""
    driver.execute_script(
        'const input = document.getElementById("token");'
        'if (arguments[0] !== null) input.value = arguments[0];'
        'input.dispatchEvent(new Event("change"));', token)


def problem(driver, status):
    """The page's banner once it shows a failure of ``status``."""
    return wait_for(driver, lambda d: d.find_element(
        By.CSS_SELECTOR, '#problem[data-status="%s"]:not([hidden])'
        % status))


def recovered(driver):
    wait_for(driver, lambda d: not d.find_element(
        By.ID, 'problem').is_displayed()
        and d.find_element(By.ID, 'status').text.startswith('updated '))


def test_approved_by_another_operator_first(page, dashboard):
    driver, _decision = page
    ctx = context.get_admin_context()
    late = _memory_targets(ctx, dashboard[3]['compute-2'], 'isolated_sharing',
                           {VM_D: 6 * GIB})
    row = 'tr.decision[data-uuid="%s"]' % late['uuid']
    wait_for(driver, lambda d: elements(d, row + ' button.approve'))
    # The button as the operator saw it; the row is gone at the next
    # refresh, the button's click still posts.
    driver.execute_script(
        'window.__approve = document.querySelector(arguments[0]);',
        row + ' button.approve')
    transitions.request_transition(ctx, late['uuid'], 'approve')
    driver.execute_script('window.__approve.click();')
    result = wait_for(
        driver, expected_conditions.visibility_of_element_located(
            (By.CSS_SELECTOR, '#decision-result.error')))
    assert 'Could not approve memory_targets decision %s of compute-2: ' \
        '409 %s: ' % (late['uuid'][:8], errors.DECISION_STATE_CONFLICT) \
        in result.text
    screenshot(driver, 'conflict')


def test_refused_token_asks_for_one(page):
    driver, _decision = page
    try:
        # noauth2 answers 401 without a token, 403 to a non-admin one.
        refresh_now(driver, 'not-an-admin-token')
        assert '403 ' in problem(driver, 403).text
        refresh_now(driver, '')
        banner = problem(driver, 401)
        assert 'The API refused the token: 401 %s: ' \
            % errors.AUTH_UNAUTHORIZED in banner.text
        assert 'Enter a valid token in the Token field' in banner.text
        assert 'needed' in driver.find_element(
            By.ID, 'token').get_attribute('class')
        screenshot(driver, 'token-refused')
        # The token went in a header only: no URL the page asked for
        # holds it.
        urls = driver.execute_script(
            'return performance.getEntriesByType("resource")'
            '.map(entry => entry.name);')
        assert urls and not [url for url in urls
                             if 'not-an-admin-token' in url]
    finally:
        refresh_now(driver, 'admin')
    recovered(driver)
    assert 'needed' not in driver.find_element(
        By.ID, 'token').get_attribute('class')


def test_api_error_is_shown(page, dashboard):
    driver, _decision = page
    faults = dashboard[2]
    faults.status = 503
    try:
        refresh_now(driver)
        banner = problem(driver, 503)
        assert banner.text == 'Could not read the API: 503 ' \
            'memcanal.test.fault: ' + HOSTILE
        no_markup_ran(driver)
        # What was drawn stays, under the banner.
        assert len(elements(driver, '#host-map g.host')) == 3
        screenshot(driver, 'api-error')
    finally:
        faults.status = None
    refresh_now(driver)
    recovered(driver)


def test_api_down_is_shown(page):
    driver, _decision = page
    driver.execute_cdp_cmd('Network.enable', {})
    conditions = {'latency': 0, 'downloadThroughput': -1,
                  'uploadThroughput': -1}
    driver.execute_cdp_cmd('Network.emulateNetworkConditions',
                           dict(conditions, offline=True))
    try:
        refresh_now(driver)
        assert problem(driver, 0).text.startswith(
            'Could not read the API: The API does not answer (')
        assert 'error' in driver.find_element(
            By.ID, 'status').get_attribute('class')
    finally:
        driver.execute_cdp_cmd('Network.emulateNetworkConditions',
                               dict(conditions, offline=False))
    refresh_now(driver)
    recovered(driver)
