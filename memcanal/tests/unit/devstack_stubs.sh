# devstack's functions that memcanal's plugin calls, for its test
# (test_devstack.py). Each records its call to $STUB_LOG, one a line:
# the name and the arguments, separated by tabs. The INI functions edit
# the files for real (devstack_ini.py, run by $STUB_PYTHON), so the test
# reads back what the plugin wrote.

function stub_record {
    local IFS=$'\t'
    echo "$*" >> $STUB_LOG
}

function stub_ini {
    $STUB_PYTHON -I -S $STUB_INI "$@"
}

function iniset {
    stub_ini set "$@"
}

function iniset_multiline {
    stub_ini set "$@"
}

function iniget {
    stub_ini get "$@" | head -n 1
}

function iniget_multiline {
    stub_ini get "$@"
}

function is_service_enabled {
    local service
    for service in "$@"; do
        [[ ,$ENABLED_SERVICES, == *,$service,* ]] && return 0
    done
    return 1
}

function enable_service {
    local service
    for service in "$@"; do
        is_service_enabled $service || ENABLED_SERVICES=${ENABLED_SERVICES:+$ENABLED_SERVICES,}$service
    done
}

function get_python_exec_prefix {
    echo $STUB_BIN_DIR
}

function database_connection_url {
    echo "mysql+pymysql://root:$DATABASE_PASSWORD@127.0.0.1/$1?charset=utf8"
}

function iniset_rpc_backend {
    stub_record iniset_rpc_backend "$@"
    iniset $2 DEFAULT transport_url "rabbit://stackrabbit:$RABBIT_PASSWORD@127.0.0.1:5672/"
}

function configure_keystone_authtoken_middleware {
    stub_record configure_keystone_authtoken_middleware "$@"
    iniset $1 keystone_authtoken auth_type password
    iniset $1 keystone_authtoken username $2
}

# devstack starts and stops only enabled services.
function run_process {
    is_service_enabled $1 && stub_record run_process "$@"
    return 0
}

function stop_process {
    is_service_enabled $1 && stub_record stop_process "$@"
    return 0
}

# Run as the test's user; the call is recorded all the same.
function sudo {
    stub_record sudo "$@"
    "$@"
}

function die {
    stub_record die "$@"
    exit 1
}

function stub_recorder {
    eval "function $1 { stub_record $1 \"\$@\"; }"
}

for stubbed in define_plugin echo_summary setup_develop recreate_database \
        setup_logging create_service_user get_or_create_service \
        get_or_create_endpoint wait_for_service; do
    stub_recorder $stubbed
done

function pip_install {
    stub_record pip_install "PIP_VIRTUAL_ENV=${PIP_VIRTUAL_ENV:-}" "$@"
}
