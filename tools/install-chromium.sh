#!/usr/bin/env bash
# Install Debian's Chromium and its chromedriver (/usr/bin/chromium,
# /usr/bin/chromedriver), which the dashboard's browser test drives
# headless through selenium. Idempotent; needs root.
set -euo pipefail
. "$(dirname "$0")/apt.sh"
apt_install chromium chromium-driver
