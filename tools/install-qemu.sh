#!/usr/bin/env bash
# Install QEMU (TCG) and what building the guest-tracing plugin, the
# pager, the memory server and the test guest needs: a C compiler,
# OpenSSL's headers (TLS and page encryption) and its CLI (tools/pki.sh),
# busybox-static, cpio, and Debian's source entries so `apt-get source`
# can fetch QEMU's plugin header.
# Idempotent; needs root.
set -euo pipefail
. "$(dirname "$0")/apt.sh"
apt_install qemu-system-x86 busybox-static cpio gzip gcc libc6-dev make dpkg-dev \
    libssl-dev openssl
# Debian's QEMU source (for qemu-plugin.h) needs deb-src entries: the same
# archives as the binary entries, so nothing new is trusted.
sources=/etc/apt/sources.list.d/memcanal-deb-src.sources
if [ ! -e "$sources" ] && [ -e /etc/apt/sources.list.d/debian.sources ]; then
    sed 's/^Types: deb$/Types: deb-src/' \
        /etc/apt/sources.list.d/debian.sources > "$sources"
    apt-get -o DPkg::Lock::Timeout=600 update -qq
fi
