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
