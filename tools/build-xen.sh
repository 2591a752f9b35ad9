#!/usr/bin/env bash
# Build what a Xen 4.17 boot nested in QEMU TCG needs, into DIR (default
# ${XDG_CACHE_HOME:-$HOME/.cache}/memcanal/xen):
#   xen.elf        Xen (xen-hypervisor-4.17-amd64's, uncompressed: QEMU's
#                  -kernel takes a multiboot ELF, not a gzip)
#   vmlinuz        Debian's kernel, dom0's and the domU's
#   dom0.cpio.gz   busybox-static, Xen's toolstack (xl, xenstored,
#                  xenconsoled, xen-init-dom0) with its libraries,
#                  memcanal-logdirty, the Xen, virtio-serial, virtio-net,
#                  9p and overlayfs modules, hypervisor-patches/xen/dom0-init
#                  and dom0-hostroot, the domU's kernel and initrd under
#                  /domu, and under /hostroot what dom0-hostroot lays over
#                  the host's root (shared read-only with QEMU's virtfs)
#                  to run libvirtd's Xen driver and memcanal's agent in
#                  it: libvirt-daemon-driver-xen's libvirt_driver_libxl.so
#                  (the version of this machine's libvirt-daemon) with the
#                  Xen libraries it needs, a libvirtd.conf and a CPU model
#                  libvirt can decode Xen's view of TCG's CPU with
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
# The sources and the version of libvirt-daemon (whose Xen driver goes
# into dom0.cpio.gz), if installed.
stamp=$( (cat "${sources[@]}"
          dpkg-query -W -f '${Version}' libvirt-daemon 2>/dev/null || true) \
    | sha256sum | cut -d' ' -f1)
if [ "$(cat "$dir/stamp" 2>/dev/null)" = "$stamp" ]; then
    echo "build-xen: $dir is up to date"
    exit 0
fi
. tools/apt.sh
# QEMU, busybox-static, cpio, a C compiler (the project's own list).
bash tools/install-qemu.sh
downloads=$dir/downloads
unpacked=$dir/root       # Xen's packages and the kernel, as dpkg -x makes
mkdir -p "$downloads" "$unpacked"

# Xen, its toolstack, its libraries and headers; the kernel
# linux-image-amd64 depends on, as tools/build-test-guest.sh takes it.
kernel_package=$(debian_kernel_package)
packages=(xen-hypervisor-4.17-amd64 xen-utils-4.17 libxenmisc4.17
    libxencall1 libxendevicemodel1 libxenevtchn1 libxenforeignmemory1
    libxengnttab1 libxenstore4 libxentoolcore1 libxentoollog1
    libxenhypfs1 libxen-dev libyajl2 "$kernel_package")
# libvirt's Xen driver, loaded by this machine's libvirtd run in dom0
# over the shared root: the same version as its libvirt-daemon, if that
# is installed (libvirt_driver_libxl.so uses libvirt's private symbols).
libvirt_version=$(dpkg-query -W -f '${Version}' libvirt-daemon 2>/dev/null \
    || true)
if [ -n "$libvirt_version" ]; then
    packages+=("libvirt-daemon-driver-xen=$libvirt_version")
fi
for package in "${packages[@]}"; do
    name=${package%%=*}
    version=${package#"$name"}; version=${version#=}; version=${version#*:}
    if ! ls "$downloads/${name}_${version:-*}"_*.deb >/dev/null 2>&1; then
        (cd "$downloads" && apt-get download -qq "$package" 2>/dev/null)
    fi
done
for deb in "$downloads"/*.deb; do
    if [ ! -e "$unpacked/.done-$(basename "$deb")" ]; then
        dpkg-deb -x "$deb" "$unpacked"
        touch "$unpacked/.done-$(basename "$deb")"
    fi
done

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
cp hypervisor-patches/xen/dom0-hostroot "$dom0/bin/memcanal-hostroot"
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
# Module order: virtio-serial's chain first, then Xen's devices, then
# virtio-net, 9p and overlayfs (the host's root, its network).
module_names=(virtio_ring virtio virtio_pci_legacy_dev virtio_pci_modern_dev
    virtio_pci virtio_console xen-privcmd xenfs xen-evtchn xen-gntdev
    xen-gntalloc failover net_failover virtio_net netfs fscache 9pnet
    9pnet_virtio 9p overlay)
for module in "${module_names[@]}"; do
    find "$modules" -name "$module.ko" -exec cp {} "$dom0/lib/modules/" \;
    echo "$module" >> "$dom0/lib/modules/order"
done
cp "$dir/vmlinuz" "$dir/domu.cpio.gz" "$dom0/domu/"

# /hostroot: laid over the host's root in dom0 (dom0-hostroot), what
# this machine's libvirtd lacks to drive Xen. Nothing if libvirt-daemon
# is not installed here.
libxl_driver=usr/lib/x86_64-linux-gnu/libvirt/connection-driver/libvirt_driver_libxl.so
if [ -n "$libvirt_version" ]; then
    over=$dom0/hostroot
    mkdir -p "$over/$(dirname "$libxl_driver")" "$over/etc/libvirt" \
        "$over/usr/share/libvirt/cpu_map"
    cp "$unpacked/$libxl_driver" "$over/$libxl_driver"
    # The libraries it needs that this machine has not (Xen's): ldd
    # against the unpacked packages, keeping those found there.
    for library in $(LD_LIBRARY_PATH=$library_path ldd "$over/$libxl_driver" \
            | awk '$2 == "=>" && $3 ~ /^\// {print $3}' \
            | grep "^$unpacked/"); do
        target=$over/${library#"$unpacked"}
        mkdir -p "$(dirname "$target")"
        cp -L "$library" "$target"
    done
    # memcanal-logdirty at the same path as in dom0's own root, for an
    # agent run there; its libraries are libxl's.
    mkdir -p "$over/usr/lib/xen-4.17/bin" "$over/usr/local/bin"
    cp "$dir/build/memcanal-logdirty" "$over/usr/lib/xen-4.17/bin/"
    ln -s /usr/lib/xen-4.17/bin/memcanal-logdirty "$over/usr/local/bin/"
    cp hypervisor-patches/xen/libvirtd.conf "$over/etc/libvirt/"
    # On TCG's AMD CPU Xen hides sep and vme from dom0's host CPU
    # features: no model of libvirt's decodes it ("x86Decode: Cannot
    # find suitable CPU model") and the Xen driver fails to start. A
    # model of the two features every x86 has.
    cp hypervisor-patches/xen/cpu_map-x86_tcgxen.xml \
        "$over/usr/share/libvirt/cpu_map/x86_tcgxen.xml"
    sed "s|^\( *\)<include filename='x86_486.xml'/>|&\n\1<include filename='x86_tcgxen.xml'/>|" \
        /usr/share/libvirt/cpu_map/index.xml \
        > "$over/usr/share/libvirt/cpu_map/index.xml"
    grep -q x86_tcgxen "$over/usr/share/libvirt/cpu_map/index.xml"
fi
cpio_gz "$dom0" "$dir/dom0.cpio.gz"

echo "$stamp" > "$dir/stamp"
echo "build-xen: $dir/{xen.elf,vmlinuz,dom0.cpio.gz,domu.cpio.gz}"
