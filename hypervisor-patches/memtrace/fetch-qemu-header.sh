#!/usr/bin/env bash
# fetch-qemu-header.sh DOWNLOADS INCLUDE: put the installed QEMU's
# include/qemu/qemu-plugin.h into INCLUDE, from Debian's QEMU source
# package of the same version (cached in DOWNLOADS).
set -euo pipefail
downloads=$1 include=$2
version=$(dpkg-query -W -f='${source:Version}' qemu-system-x86)
mkdir -p "$downloads" "$include"
cd "$downloads"
upstream=${version#*:}
upstream=${upstream%-*}
tarball=qemu_${upstream}.orig.tar.xz
[ -e "$tarball" ] || apt-get source --download-only -qq "qemu=$version" \
    >/dev/null 2>&1
tar -xJf "$tarball" --wildcards --strip-components=3 -O \
    '*/include/qemu/qemu-plugin.h' > "$include/qemu-plugin.h.tmp"
mv "$include/qemu-plugin.h.tmp" "$include/qemu-plugin.h"
