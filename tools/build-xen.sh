#!/usr/bin/env bash
# Build what a Xen 4.17 boot nested in QEMU TCG needs, into DIR (default
# ${XDG_CACHE_HOME:-$HOME/.cache}/memcanal/xen):
#   xen.elf        Xen (xen-hypervisor-4.17-amd64's, uncompressed: QEMU's
#                  -kernel takes a multiboot ELF, not a gzip)
#   vmlinuz        Debian's kernel, dom0's and the domU's
#   dom0.cpio.gz   busybox-static, Xen's toolstack (xl, xenstored,
#                  xenconsoled, xen-init-dom0) with its libraries,
#                  memcanal-logdirty, the Xen and virtio-serial modules,
#                  hypervisor-patches/xen/dom0-init, and the domU's
#                  kernel and initrd under /domu
#   domu.cpio.gz   busybox-static, hypervisor-patches/xen/domu-init and
#                  memcanal-writer (static)
# Xen's packages are fetched with apt-get download and unpacked with
# dpkg-deb -x under DIR: nothing of Xen is installed on this machine.
# A second run with the same sources does nothing.
# See memcanal/tests/functional/xen_host.py for the boot, doc/xen.md.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/memcanal/xen}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
sources=(tools/build-xen.sh hypervisor-patches/xen/*)
stamp=$(cat "${sources[@]}" | sha256sum | cut -d' ' -f1)
if [ "$(cat "$dir/stamp" 2>/dev/null)" = "$stamp" ]; then
    echo "build-xen: $dir is up to date"
    exit 0
fi
# QEMU, busybox-static, cpio, a C compiler (the project's own list).
bash tools/install-qemu.sh
downloads=$dir/downloads
unpacked=$dir/root       # Xen's packages and the kernel, as dpkg -x makes
mkdir -p "$downloads" "$unpacked"

# Xen, its toolstack, its libraries and headers; the kernel
# linux-image-amd64 depends on, as tools/build-test-guest.sh takes it.
kernel_package=$(apt-cache depends linux-image-amd64 \
    | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
packages=(xen-hypervisor-4.17-amd64 xen-utils-4.17 libxenmisc4.17
    libxencall1 libxendevicemodel1 libxenevtchn1 libxenforeignmemory1
    libxengnttab1 libxenstore4 libxentoolcore1 libxentoollog1
    libxenhypfs1 libxen-dev libyajl2 "$kernel_package")
for package in "${packages[@]}"; do
    if ! ls "$downloads/${package}"_*.deb >/dev/null 2>&1; then
        (cd "$downloads" && apt-get download -qq "$package" 2>/dev/null)
    fi
done
if [ ! -e "$unpacked/.done" ]; then
    for deb in "$downloads"/*.deb; do
        dpkg-deb -x "$deb" "$unpacked"
    done
    touch "$unpacked/.done"
fi

zcat "$unpacked"/boot/xen-4.17-amd64.gz > "$dir/xen.elf"
cp "$unpacked"/boot/vmlinuz-* "$dir/vmlinuz"
modules=$(echo "$unpacked"/lib/modules/*)

# The helpers: memcanal-logdirty against the unpacked libxenctrl, the
# domU's writer static (its initrd has no libc).
make -s -C hypervisor-patches/xen XEN_ROOT="$unpacked" BUILD="$dir/build"
gcc -O2 -static -Wall -o "$dir/build/memcanal-writer" \
    hypervisor-patches/xen/writer.c

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# cpio_gz TREE OUT: an initramfs of TREE.
cpio_gz() {
    (cd "$1" && find . | cpio -o -H newc --quiet) | gzip -1 > "$2.tmp"
    mv "$2.tmp" "$2"
}

# The domU.
domu=$work/domu
mkdir -p "$domu"/{bin,dev,proc,sys}
cp /bin/busybox "$domu/bin/busybox"
cp hypervisor-patches/xen/domu-init "$domu/init"
cp "$dir/build/memcanal-writer" "$domu/bin/"
cpio_gz "$domu" "$dir/domu.cpio.gz"

# dom0: the toolstack at Debian's paths, with every library ldd finds
# for it, from the unpacked packages or, for libc and the like, from
# this machine (the same Debian release).
dom0=$work/dom0
mkdir -p "$dom0"/{bin,dev,proc,sys,domu,lib/modules,lib64}
cp /bin/busybox "$dom0/bin/busybox"
cp hypervisor-patches/xen/dom0-init "$dom0/init"
tools=()
for tool in xl xenstored xenconsoled xen-init-dom0; do
    tools+=("$unpacked/usr/lib/xen-4.17/bin/$tool")
done
tools+=("$dir/build/memcanal-logdirty")
mkdir -p "$dom0/usr/lib/xen-4.17/bin" "$dom0/etc/xen"
touch "$dom0/etc/xen/xl.conf"   # xl's defaults; it warns without one
cp "${tools[@]}" "$dom0/usr/lib/xen-4.17/bin/"
library_path=$unpacked/usr/lib/x86_64-linux-gnu
library_path+=:$unpacked/usr/lib/xen-4.17/lib/x86_64-linux-gnu
# xl needs libgcc_s (pthread_cancel loads it), which ldd does not show.
libraries=$( (LD_LIBRARY_PATH=$library_path ldd "${tools[@]}"
              echo "x => /lib/x86_64-linux-gnu/libgcc_s.so.1 (0)") \
    | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\/lib64/ {print $1}' \
    | sort -u)
for library in $libraries; do
    target=$dom0/${library#"$unpacked"}
    mkdir -p "$(dirname "$target")"
    cp -L "$library" "$target"
done
# Module order: virtio-serial's chain first, then Xen's devices.
module_names=(virtio_ring virtio virtio_pci_legacy_dev virtio_pci_modern_dev
    virtio_pci virtio_console xen-privcmd xenfs xen-evtchn xen-gntdev
    xen-gntalloc)
for module in "${module_names[@]}"; do
    find "$modules" -name "$module.ko" -exec cp {} "$dom0/lib/modules/" \;
    echo "$module" >> "$dom0/lib/modules/order"
done
cp "$dir/vmlinuz" "$dir/domu.cpio.gz" "$dom0/domu/"
cpio_gz "$dom0" "$dir/dom0.cpio.gz"

echo "$stamp" > "$dir/stamp"
echo "build-xen: $dir/{xen.elf,vmlinuz,dom0.cpio.gz,domu.cpio.gz}"
