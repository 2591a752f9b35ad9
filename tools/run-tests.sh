#!/usr/bin/env bash
# Install memcanal with its test requirements into a virtualenv, start the
# real services, and run every test (unit and functional) with pytest; the
# tests against a real nova run in nova's own venv (tools/install-nova.sh).
#   tools/run-tests.sh [pytest arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${MEMCANAL_VENV:-.venv}
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check \
    -r requirements.txt -r test-requirements.txt -e .
# keystone's and nova's venvs take pip alone: they install while the
# system packages below do. Their output is shown if they fail.
installs=$(mktemp -d)
bash tools/keystone.sh install > "$installs/keystone" 2>&1 &
keystone_install=$!
bash tools/install-nova.sh > "$installs/nova" 2>&1 &
nova_install=$!
finished() {
    wait "$1" || { cat "$installs/$2"; echo "$2's install failed" >&2; exit 1; }
}
bash tools/start-services.sh
# QEMU, the test guest and the memtrace plugin; libvirtd and libvirt-python.
bash tools/build-test-guest.sh
bash tools/install-libvirt.sh "$venv"
# Xen 4.17, dom0's and the guests' boot images, for test_xen.py (after
# libvirt: dom0 takes libvirt's Xen driver of the host's libvirt).
bash tools/build-xen.sh
# Functional tests fail, rather than skip, when a service is missing.
export MEMCANAL_REQUIRE_SERVICES=1
# The unit tests need no more than this: they run while the rest
# installs, their output shown once it has.
"$venv/bin/pytest" -q -p no:cacheprovider memcanal/tests/unit "$@" \
    > "$installs/unit" 2>&1 &
unit_tests=$!
# Headless Chromium and chromedriver for the dashboard's browser test.
bash tools/install-chromium.sh
# Prometheus's server, which test_prometheus.py starts on a port of its
# own to scrape the API, a service and an agent.
bash tools/install-prometheus.sh
# A real keystone for the API's authentication tests, in its own venv.
finished $keystone_install keystone
# A real nova and placement, with memcanal, in their own venv.
finished $nova_install nova
# A nova compute node's other pieces: qemu-img, libvirt-python in nova's
# venv, glance in its own (test_nova_compute.py).
bash tools/install-compute-node.sh
# The tests that need nova (its fake driver, in-process, in its venv)
# run beside the unit tests; their output is shown at the end.
"${MEMCANAL_NOVA_VENV:-.venv-nova}/bin/pytest" -q -p no:cacheprovider \
    memcanal/tests/nova_functional "$@" > "$installs/nova-tests" 2>&1 &
nova_tests=$!
# The unit tests' outcome, the functional suite, then nova's tests'
# outcome; any failing fails the run. Arguments that select no test of
# one of them (pytest's 5) are no failure there.
status=0
settle() {
    local code=$1
    if [ $code -ne 0 ] && ! { [ $# -gt 1 ] && [ $code -eq 5 ]; }; then
        status=$code
    fi
}
unit_status=0
wait $unit_tests || unit_status=$?
cat "$installs/unit"
settle $unit_status "$@"
# Two functional tests at a time (pytest-xdist), each module's tests on
# one worker, libvirtd's users all on one (memcanal/tests/functional/
# scheduling.py): most of a functional test's time is a guest's or a
# service's, not this machine's CPU.
functional_status=0
"$venv/bin/pytest" -q -p no:cacheprovider --durations=25 \
    -n 2 -p memcanal.tests.functional.scheduling --dist loadscope \
    --no-loadscope-reorder memcanal/tests \
    --ignore=memcanal/tests/unit --ignore=memcanal/tests/nova_functional \
    "$@" || functional_status=$?
settle $functional_status "$@"
nova_status=0
wait $nova_tests || nova_status=$?
cat "$installs/nova-tests"
settle $nova_status "$@"
exit $status
