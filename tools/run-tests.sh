#!/usr/bin/env bash
# Install memcanal with its test requirements into a virtualenv, start the
# real services, and run every test (unit and functional) with pytest.
#   tools/run-tests.sh [pytest arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${MEMCANAL_VENV:-.venv}
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check \
    -r requirements.txt -r test-requirements.txt -e .
bash tools/start-services.sh
# QEMU, the test guest and the memtrace plugin; libvirtd and libvirt-python.
bash tools/build-test-guest.sh
bash tools/install-libvirt.sh "$venv"
# A real keystone for the API's authentication tests, in its own venv.
bash tools/keystone.sh install
# Functional tests fail, rather than skip, when a service is missing.
export MEMCANAL_REQUIRE_SERVICES=1
exec "$venv/bin/pytest" -q -p no:cacheprovider memcanal/tests "$@"
