#!/bin/bash
# A certificate authority and memory-server certificates, with the openssl
# CLI, for tests and devstack (issue #25: every memcanal-memserver
# connection is TLS 1.3, and pagers check the server against the cloud's
# CA). A production cloud uses its own CA the same way.
#
#   tools/pki.sh ca DIR
#       DIR/ca.pem (the CA certificate pagers get as --tls-ca) and
#       DIR/ca-key.pem (0600), unless they exist.
#   tools/pki.sh server DIR NAME [HOST...]
#       DIR/NAME.pem and DIR/NAME-key.pem (0600), signed by DIR's CA,
#       valid for every HOST (an IP address or a DNS name; default NAME):
#       the hosts of the addresses the memory server is registered under.
#
# Keys are ECDSA P-256; certificates last DAYS days (default 825).
set -euo pipefail

DAYS=${DAYS:-825}

usage() {
    sed -n '2,14p' "$0" >&2
    exit 2
}

# subjectAltName of the given hosts: IP:... for addresses, DNS:... else.
alt_names() {
    local host names=()
    for host in "$@"; do
        if [[ $host =~ ^[0-9.]+$ || $host == *:* ]]; then
            names+=("IP:$host")
        else
            names+=("DNS:$host")
        fi
    done
    (IFS=,; echo "${names[*]}")
}

new_key() {
    (umask 077 && openssl genpkey -algorithm EC \
        -pkeyopt ec_paramgen_curve:P-256 -out "$1")
}

make_ca() {
    local dir=$1
    mkdir -p "$dir"
    if [ -e "$dir/ca.pem" ]; then
        return 0
    fi
    new_key "$dir/ca-key.pem"
    openssl req -x509 -new -key "$dir/ca-key.pem" -sha256 -days "$DAYS" \
        -subj "/CN=memcanal memory-server CA" \
        -addext "basicConstraints=critical,CA:TRUE" \
        -addext "keyUsage=critical,keyCertSign,cRLSign" \
        -out "$dir/ca.pem" 2>/dev/null
}

make_server() {
    local dir=$1 name=$2
    shift 2
    [ $# -gt 0 ] || set -- "$name"
    [ -e "$dir/ca.pem" ] || { echo "no CA in $dir: $0 ca $dir" >&2; exit 1; }
    new_key "$dir/$name-key.pem"
    local extensions
    extensions=$(mktemp)
    trap 'rm -f "$extensions" "$dir/$name.csr"' RETURN
    cat > "$extensions" <<EOF
basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=serverAuth
subjectAltName=$(alt_names "$@")
EOF
    openssl req -new -key "$dir/$name-key.pem" -subj "/CN=$1" \
        -out "$dir/$name.csr"
    openssl x509 -req -in "$dir/$name.csr" -CA "$dir/ca.pem" \
        -CAkey "$dir/ca-key.pem" -CAcreateserial -sha256 -days "$DAYS" \
        -extfile "$extensions" -out "$dir/$name.pem" 2>/dev/null
}

case ${1:-} in
    ca) [ $# -eq 2 ] || usage; make_ca "$2" ;;
    server) [ $# -ge 3 ] || usage; make_server "${@:2}" ;;
    *) usage ;;
esac
