#!/usr/bin/env bash
# A real nova and placement, with memcanal, in their own virtualenv: the
# nova functional tests (memcanal/tests/nova_functional) run there, and
# placement can be served from it under gunicorn.
#
#   tools/install-nova.sh
#
# MEMCANAL_NOVA_VENV defaults to .venv-nova at the top of the checkout.
# nova's and placement's oslo.* pins must not steer memcanal's own venv.
# nova's wheel ships its functional test framework but not the test
# dependencies it needs; they are listed here. SQLAlchemy 2.1 turns a
# deprecation warning into an error under nova's test fixtures, so it is
# capped. A marker file records what was installed, for which checkout:
# with it present and unchanged the script does nothing. memcanal is
# installed editable, so its code is the checkout's.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
venv=${MEMCANAL_NOVA_VENV:-$top/.venv-nova}
packages=(
    'nova==34.0.0' 'openstack-placement==16.0.0' 'SQLAlchemy<2.1'
    gunicorn openstacksdk pytest
    testtools oslotest requests-mock wsgi-intercept ddt gabbi
)
marker=$venv/.memcanal-nova-installed
# What was installed, and for which checkout (memcanal is editable).
want="$top ${packages[*]}"

[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
if [ "$(cat "$marker" 2>/dev/null)" != "$want" ]; then
    "$venv/bin/pip" install -q --disable-pip-version-check "${packages[@]}"
    # memcanal itself (its C extension built), under the same caps.
    "$venv/bin/pip" install -q --disable-pip-version-check \
        -e "$top" 'SQLAlchemy<2.1'
    # nova's test configuration looks for api-paste.ini under
    # site-packages/etc/nova; the wheel installs it to <venv>/etc/nova.
    site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    mkdir -p "$site/etc"
    ln -sfn "$venv/etc/nova" "$site/etc/nova"
    printf '%s' "$want" > "$marker"
fi
