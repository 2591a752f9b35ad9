# Sourced by tools/*.sh: install Debian packages the project needs.
# apt_install PACKAGE...   installs those not yet installed (root).
apt_install() {
    local missing=()
    for package in "$@"; do
        dpkg-query -W -f='${Status}' "$package" 2>/dev/null \
            | grep -q 'ok installed' || missing+=("$package")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    if [ -z "${APT_UPDATED:-}" ]; then
        apt-get -o DPkg::Lock::Timeout=600 update -qq
        APT_UPDATED=1
    fi
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 \
        install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# debian_kernel_package: the kernel package linux-image-amd64 depends on
# (the guests' kernel: tools/build-test-guest.sh, tools/build-xen.sh).
debian_kernel_package() {
    apt-cache depends linux-image-amd64 \
        | awk '/Depends: linux-image-[0-9]/ {print $2; exit}'
}
