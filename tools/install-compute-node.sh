#!/usr/bin/env bash
# The pieces of a nova compute node beside tools/install-nova.sh's nova,
# for the compute node's functional test (memcanal/tests/functional/
# test_nova_compute.py) and as an operator's node needs them:
# - qemu-img (Debian's qemu-utils), which nova's libvirt driver runs;
# - libvirt-python and PyMySQL in nova's venv (its libvirt driver, MariaDB);
# - glance, with a file store, in a venv of its own: glance 33 brings
#   SQLAlchemy 2.1, which nova's venv caps below.
#
#   tools/install-compute-node.sh
#
# MEMCANAL_NOVA_VENV defaults to .venv-nova, MEMCANAL_GLANCE_VENV to
# .venv-glance, at the top of the checkout. Quick when all is there.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
. tools/apt.sh
nova_venv=${MEMCANAL_NOVA_VENV:-$top/.venv-nova}
glance_venv=${MEMCANAL_GLANCE_VENV:-$top/.venv-glance}
apt_install qemu-utils
bash tools/install-libvirt.sh "$nova_venv"
"$nova_venv/bin/python" -c 'import pymysql' 2>/dev/null \
    || "$nova_venv/bin/pip" install -q --disable-pip-version-check PyMySQL
[ -x "$glance_venv/bin/python" ] || python3 -m venv "$glance_venv"
"$glance_venv/bin/python" -c 'import glance, gunicorn, pymysql' 2>/dev/null \
    || "$glance_venv/bin/pip" install -q --disable-pip-version-check \
        'glance==33.0.0' gunicorn PyMySQL
