#!/usr/bin/env bash
# OpenStack Watcher 17 in its own virtualenv, for benchmarks/watcher_compare.py
# (Watcher's pins must not steer memcanal's). Not run in CI; safe to rerun.
#
#   tools/install-watcher.sh        install into $WATCHER_VENV
#
# WATCHER_VENV defaults to .venv-watcher at the top of the checkout. memcanal
# goes in editable and without its dependencies: the benchmark imports only
# memcanal.policy and memcanal.estimation, which need numpy alone.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
venv=${WATCHER_VENV:-$top/.venv-watcher}
pip=("$venv/bin/pip" install -q --disable-pip-version-check)

[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"${pip[@]}" 'python-watcher>=17,<18' numpy
"${pip[@]}" --no-deps -e "$top"
"$venv/bin/python" -c 'import watcher, memcanal.policy.migration' \
    && echo "watcher venv ready: $venv"
