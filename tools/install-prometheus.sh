#!/usr/bin/env bash
# Install Debian's Prometheus server (/usr/bin/prometheus), which
# memcanal/tests/functional/test_prometheus.py starts itself, on a free
# port with its own configuration and storage. The package's own service
# (port 9090) is stopped and disabled: nothing here scrapes through it.
# Idempotent; needs root.
set -euo pipefail
. "$(dirname "$0")/apt.sh"
apt_install prometheus
if command -v systemctl > /dev/null && [ -d /run/systemd/system ]; then
    systemctl disable --now prometheus.service > /dev/null 2>&1 || true
elif [ -x /etc/init.d/prometheus ]; then
    /etc/init.d/prometheus stop > /dev/null 2>&1 || true
fi
