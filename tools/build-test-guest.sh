#!/usr/bin/env bash
# Build the test guest and the guest-tracing plugin into build/test-guest:
#   vmlinuz          Debian's kernel (linux-image-amd64's, unpacked)
#   vmlinux          the same kernel uncompressed, booted through PVH
#   initramfs.gz     busybox-static, hypervisor-patches/test-guest/init,
#                    wsswork (static), and the virtio balloon/mem modules
#   memtrace.so      the QEMU TCG plugin (hypervisor-patches/memtrace)
# Installs what it needs with tools/install-qemu.sh. Downloads are cached
# in build/downloads; a second run only rebuilds what changed.
set -euo pipefail
cd "$(dirname "$0")/.."
. tools/apt.sh
bash tools/install-qemu.sh
out=build/test-guest
downloads=build/downloads
mkdir -p "$out" "$downloads"

# The kernel: the package linux-image-amd64 depends on, unpacked.
kernel_package=$(debian_kernel_package)
if ! ls "$downloads/$kernel_package"_*.deb >/dev/null 2>&1; then
    (cd "$downloads" && apt-get download "$kernel_package" 2>/dev/null)
fi
kernel_dir=$downloads/$kernel_package
if [ ! -d "$kernel_dir" ]; then
    dpkg-deb -x "$downloads/$kernel_package"_*.deb "$kernel_dir.tmp"
    mv "$kernel_dir.tmp" "$kernel_dir"
fi
cp -p "$kernel_dir"/boot/vmlinuz-* "$out/vmlinuz"
[ "$out/vmlinux" -nt "$out/vmlinuz" ] || python3 \
    hypervisor-patches/test-guest/extract-vmlinux.py "$out/vmlinuz" "$out/vmlinux"

# The initramfs.
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root"/{bin,dev,proc,sys,lib/modules}
cp /bin/busybox "$root/bin/busybox"
cp hypervisor-patches/test-guest/init "$root/init"
gcc -O2 -static -Wall -o "$root/bin/wsswork" \
    hypervisor-patches/test-guest/wsswork.c
for module in virtio_ring virtio virtio_pci_legacy_dev \
        virtio_pci_modern_dev virtio_pci virtio_balloon virtio_mem; do
    find "$kernel_dir/lib/modules" -name "$module.ko" \
        -exec cp {} "$root/lib/modules/" \;
done
(cd "$root" && find . | cpio -o -H newc --quiet) | gzip -1 > "$out/initramfs.gz"

make -s -C hypervisor-patches/memtrace BUILD="$PWD/build/memtrace" \
    DOWNLOADS="$PWD/$downloads"
cp build/memtrace/memtrace.so "$out/memtrace.so"
echo "build-test-guest: $out/{vmlinuz,vmlinux,initramfs.gz,memtrace.so}"
