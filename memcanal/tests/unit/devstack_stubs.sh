# devstack's functions that memcanal's plugin calls, for its test
# (test_devstack.py). Each records its call to $STUB_LOG, one a line:
# the name and the arguments, separated by tabs. The INI functions edit
# the files for real (devstack_ini.py, run by $STUB_PYTHON), so the test
# reads back what the plugin wrote. Each stub takes the arguments its
# devstack function takes (the source file is named above it) and stops
# the run on any other count, recorded as "wrong_arity".

function stub_record {
    local IFS=$'\t'
    echo "$*" >> $STUB_LOG
}

# stub_arity MIN MAX ARGS... - stop unless MIN <= #ARGS <= MAX (MAX
# empty: no upper bound).
function stub_arity {
    local min=$1 max=$2
    shift 2
    if (( $# < min )) || { [[ -n $max ]] && (( $# > max )); }; then
        stub_record wrong_arity "${FUNCNAME[1]}" "$@"
        echo "${FUNCNAME[1]}: $# arguments, devstack's takes $min..$max" >&2
        exit 97
    fi
}

function stub_ini {
    $STUB_PYTHON -I -S $STUB_INI "$@"
}

# inc/ini-config: iniset [-sudo] FILE SECTION OPTION VALUE
function iniset {
    [[ $1 == -sudo ]] && shift
    stub_arity 4 4 "$@"
    stub_ini set "$@"
}

# inc/ini-config: iniset_multiline [-sudo] FILE SECTION OPTION VALUE...
function iniset_multiline {
    [[ $1 == -sudo ]] && shift
    stub_arity 4 '' "$@"
    stub_ini set "$@"
}

# inc/ini-config: iniget FILE SECTION OPTION
function iniget {
    stub_arity 3 3 "$@"
    stub_ini get "$@" | head -n 1
}

# inc/ini-config: iniget_multiline FILE SECTION OPTION, which prints
# every value on one line (echo ${values}).
function iniget_multiline {
    stub_arity 3 3 "$@"
    echo $(stub_ini get "$@")
}

# functions-common: is_service_enabled SERVICE... (any of them)
function is_service_enabled {
    stub_arity 1 '' "$@"
    local service
    for service in "$@"; do
        [[ ,$ENABLED_SERVICES, == *,$service,* ]] && return 0
    done
    return 1
}

# functions-common: enable_service SERVICE...
function enable_service {
    stub_arity 1 '' "$@"
    local service
    for service in "$@"; do
        is_service_enabled $service || ENABLED_SERVICES=${ENABLED_SERVICES:+$ENABLED_SERVICES,}$service
    done
}

# inc/python: get_python_exec_prefix
function get_python_exec_prefix {
    stub_arity 0 0 "$@"
    echo $STUB_BIN_DIR
}

# lib/database: database_connection_url DB
function database_connection_url {
    stub_arity 1 1 "$@"
    echo "mysql+pymysql://root:$DATABASE_PASSWORD@127.0.0.1/$1?charset=utf8"
}

# lib/rpc_backend: iniset_rpc_backend PACKAGE FILE [SECTION [VHOST]]
function iniset_rpc_backend {
    stub_arity 2 4 "$@"
    stub_record iniset_rpc_backend "$@"
    iniset $2 ${3:-DEFAULT} transport_url "rabbit://stackrabbit:$RABBIT_PASSWORD@127.0.0.1:5672/"
}

# lib/keystone: configure_keystone_authtoken_middleware FILE USER
# [SECTION [SERVICE_TYPE]]
function configure_keystone_authtoken_middleware {
    stub_arity 2 4 "$@"
    stub_record configure_keystone_authtoken_middleware "$@"
    local section=${3:-keystone_authtoken}
    iniset $1 $section auth_type password
    iniset $1 $section auth_url $KEYSTONE_SERVICE_URI
    iniset $1 $section username $2
}

# lib/apache: write_uwsgi_config FILE WSGI URL [HTTP [NAME]]; WSGI is a
# module:attribute (devstack 2024.2+) or a script path. HTTP set: uwsgi
# serves HTTP itself, with no apache proxy.
function write_uwsgi_config {
    stub_arity 3 5 "$@"
    stub_record write_uwsgi_config "$@"
    local file=$1 wsgi=$2 http=$4
    rm -f $file
    if [[ $wsgi =~ ^[a-zA-Z0-9_.]+:[a-zA-Z0-9_]+$ ]]; then
        iniset $file uwsgi module $wsgi
    else
        iniset $file uwsgi wsgi-file $wsgi
    fi
    iniset $file uwsgi processes $API_WORKERS
    iniset $file uwsgi master true
    if [[ -n $http ]]; then
        iniset $file uwsgi http $http
    else
        iniset $file uwsgi socket /var/run/uwsgi/${5:-${wsgi##*/}}.socket
    fi
}

# functions-common: run_process SERVICE COMMAND [GROUP [USER]];
# devstack starts and stops only enabled services, and its systemd unit
# (_common_systemd_pitfalls) dies on a command without an absolute
# path or with sudo.
function run_process {
    stub_arity 2 4 "$@"
    if [[ $2 != /* || $2 == *sudo* ]]; then
        die $LINENO "run_process $1: not an absolute command without sudo: $2"
    fi
    is_service_enabled $1 && stub_record run_process "$@"
    return 0
}

# functions-common: stop_process SERVICE
function stop_process {
    stub_arity 1 1 "$@"
    is_service_enabled $1 && stub_record stop_process "$@"
    return 0
}

# Run as the test's user; the call is recorded all the same.
function sudo {
    stub_record sudo "$@"
    "$@"
}

# functions-common: die LINENO MESSAGE...
function die {
    stub_arity 2 '' "$@"
    stub_record die "$@"
    exit 1
}

# stub_recorder NAME MIN MAX - a stub that checks and records its call.
function stub_recorder {
    eval "function $1 { stub_arity $2 '$3' \"\$@\"; stub_record $1 \"\$@\"; }"
}

# settings/functions-common: define_plugin NAME
stub_recorder define_plugin 1 1
# functions-common: echo_summary MESSAGE...
stub_recorder echo_summary 1 ''
# functions-common: warn LINENO MESSAGE...
stub_recorder warn 2 ''
# inc/python: setup_develop DIR [EXTRAS]
stub_recorder setup_develop 1 2
# lib/database: recreate_database DB [CHARSET]
stub_recorder recreate_database 1 2
# functions: setup_logging FILE [OTHER_COND]
stub_recorder setup_logging 1 2
# lib/keystone: create_service_user NAME [ROLE]
stub_recorder create_service_user 1 2
# functions-common: get_or_create_service NAME TYPE DESCRIPTION
stub_recorder get_or_create_service 3 3
# functions-common: get_or_create_endpoint SERVICE REGION URL [ADMIN
# [INTERNAL]]
stub_recorder get_or_create_endpoint 3 5
# functions: wait_for_service TIMEOUT URL
stub_recorder wait_for_service 2 2
# inc/async: async_wait NAME...
stub_recorder async_wait 1 ''
# functions-common: install_package PACKAGE...
stub_recorder install_package 1 ''
# functions-common: restart_service NAME
stub_recorder restart_service 1 1

# inc/python: pip_install ARGS..., into $PIP_VIRTUAL_ENV when set.
function pip_install {
    stub_arity 1 '' "$@"
    stub_record pip_install "PIP_VIRTUAL_ENV=${PIP_VIRTUAL_ENV:-}" "$@"
}
