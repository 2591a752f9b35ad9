#!/usr/bin/env bash
# Install libvirt with its QEMU driver, start its daemons, and install
# libvirt-python into a virtualenv, for the libvirt hypervisor driver
# (memcanal/agent/drivers/libvirt.py) and its functional test.
#   tools/install-libvirt.sh [VENV]      (default: .venv)
# Idempotent and quick when everything is there; needs root. There is no
# systemd here, so the daemons are started directly.
set -euo pipefail
cd "$(dirname "$0")/.."
. tools/apt.sh
venv=${1:-.venv}
apt_install libvirt-daemon-system libvirt-daemon-driver-qemu \
    qemu-system-x86 libvirt-dev pkg-config
# Without udev, /dev/kvm keeps root-only permissions. libvirt probes QEMU
# with KVM, then finds KVM unusable by its QEMU user and throws the probe
# away: every call that needs capabilities (defineXML) probes again, ~50 s
# here. udev's default rule for the device (root:kvm 0660, the QEMU user
# in group kvm) is what libvirt expects.
if [ -c /dev/kvm ] && getent group kvm >/dev/null; then
    chgrp kvm /dev/kvm
    chmod 0660 /dev/kvm
fi
# virtlogd collects the QEMU processes' output; libvirtd needs it first.
pgrep -x virtlogd >/dev/null || virtlogd -d
if ! pgrep -x libvirtd >/dev/null; then
    libvirtd -d
fi
for _ in $(seq 100); do
    [ -S /run/libvirt/libvirt-sock ] && break
    sleep 0.1
done
[ -S /run/libvirt/libvirt-sock ] || {
    echo "libvirtd did not create /run/libvirt/libvirt-sock" >&2
    exit 1
}
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
# libvirt-python builds against libvirt-dev (pkg-config), in seconds.
"$venv/bin/python" -c 'import libvirt' 2>/dev/null \
    || "$venv/bin/pip" install -q --disable-pip-version-check libvirt-python
