#!/usr/bin/env bash
# A real keystone for memcanal's functional tests, in its own virtualenv
# (its oslo.* pins must not steer memcanal's).
#
#   tools/keystone.sh install            install keystone into $KEYSTONE_VENV
#   tools/keystone.sh serve DIR PORT [DATABASE_URL]
#                                        configure keystone in DIR (its
#                                        database at DATABASE_URL, else
#                                        SQLite in DIR; fernet keys,
#                                        bootstrap admin) and serve it on
#                                        127.0.0.1:PORT until killed
#
# KEYSTONE_VENV defaults to .keystone-venv at the top of the checkout.
# The bootstrap admin is admin / $KEYSTONE_ADMIN_PASSWORD (default
# "memcanal-test") in project admin, domain Default; keystone's bootstrap
# also creates the roles admin, member and reader, each implying the next.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
venv=${KEYSTONE_VENV:-$top/.keystone-venv}
password=${KEYSTONE_ADMIN_PASSWORD:-memcanal-test}

install() {
    [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check 'keystone>=26' PyMySQL
}

serve() {
    local dir=$1 port=$2 database=${3:-sqlite:///$1/keystone.sqlite}
    mkdir -p "$dir/fernet-keys" "$dir/credential-keys"
    cat > "$dir/keystone.conf" <<CONF
[DEFAULT]
log_file = $dir/keystone.log
[database]
connection = $database
[fernet_tokens]
key_repository = $dir/fernet-keys
[fernet_receipts]
key_repository = $dir/fernet-keys
[credential]
key_repository = $dir/credential-keys
[token]
provider = fernet
CONF
    local manage=("$venv/bin/keystone-manage" --config-file "$dir/keystone.conf")
    "${manage[@]}" db_sync
    "${manage[@]}" fernet_setup --keystone-user "$(id -un)" \
        --keystone-group "$(id -gn)"
    "${manage[@]}" credential_setup --keystone-user "$(id -un)" \
        --keystone-group "$(id -gn)"
    "${manage[@]}" bootstrap --bootstrap-password "$password" \
        --bootstrap-public-url "http://127.0.0.1:$port/v3" \
        --bootstrap-internal-url "http://127.0.0.1:$port/v3"
    export OS_KEYSTONE_CONFIG_FILES="$dir/keystone.conf"
    exec "$venv/bin/python" - "$port" <<'PY'
import socketserver
import sys
from wsgiref import simple_server

port = int(sys.argv[1])
# keystone parses the command line as its own options when it loads.
sys.argv[1:] = []
from keystone.wsgi.api import application  # noqa: E402


class Server(socketserver.ThreadingMixIn, simple_server.WSGIServer):
    daemon_threads = True


class Quiet(simple_server.WSGIRequestHandler):
    def log_message(self, *args):
        pass


server = simple_server.make_server('127.0.0.1', port,
                                   application, server_class=Server,
                                   handler_class=Quiet)
print('keystone listening on %d' % server.server_port, flush=True)
server.serve_forever()
PY
}

case "${1:-}" in
    install) install ;;
    serve) shift; serve "$@" ;;
    *) echo "usage: $0 install | serve DIR PORT" >&2; exit 2 ;;
esac
