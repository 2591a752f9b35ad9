#!/bin/bash
# memcanal's devstack plugin: stack.sh, unstack.sh and clean.sh source it
# as "plugin.sh MODE [PHASE]" after devstack/settings.
#
# memcanal-api and memcanal-service run on the controller, memcanal-agent
# on every compute node; nova-scheduler gets MemCanalFilter and
# MemCanalWeigher (doc/devstack.md).

MEMCANAL_FILTER=memcanal.nova.filters.MemCanalFilter
MEMCANAL_WEIGHER=memcanal.nova.weighers.MemCanalWeigher

function memcanal_api_url {
    echo "$MEMCANAL_SERVICE_PROTOCOL://$MEMCANAL_SERVICE_HOST:$MEMCANAL_SERVICE_PORT"
}

# check_memcanal_agent_driver - fail before anything is installed when
# MEMCANAL_AGENT_DRIVER names none of the agent's driver entry points.
function check_memcanal_agent_driver {
    if ! grep -q "^$MEMCANAL_AGENT_DRIVER = \"memcanal\.agent\.drivers\." $MEMCANAL_DIR/pyproject.toml; then
        die $LINENO "MEMCANAL_AGENT_DRIVER=$MEMCANAL_AGENT_DRIVER is not a memcanal.agent.drivers entry point"
    fi
}

# install_memcanal - memcanal, with libvirt's bindings where the agent
# drives libvirt, and also into nova's own venv when nova has one.
function install_memcanal {
    local extras=""
    if is_service_enabled memcanal-agent && [[ $MEMCANAL_AGENT_DRIVER == libvirt ]]; then
        extras=libvirt
    fi
    setup_develop $MEMCANAL_DIR $extras
    # The global venv (devstack's default) is nova's environment too;
    # a per-project nova venv needs memcanal for its scheduler to load
    # the filter and weigher.
    local nova_venv=${PROJECT_VENV[nova]:-}
    if is_service_enabled n-sch && [[ -n $nova_venv ]]; then
        # pip_install applies devstack's upper constraints itself.
        PIP_VIRTUAL_ENV=$nova_venv pip_install -e $MEMCANAL_DIR
    fi
}

# memcanal_pages_guests - whether this node samples and pages its nova
# guests: the agent drives libvirt and MEMCANAL_PAGING is on.
function memcanal_pages_guests {
    is_service_enabled memcanal-agent && [[ $MEMCANAL_AGENT_DRIVER == libvirt && $MEMCANAL_PAGING == True ]]
}

# install_memcanal_paging - the pager, the shim and the QEMU wrapper
# with its settings (doc/deployment.md, "Files").
function install_memcanal_paging {
    install_package gcc make libssl-dev
    make -C $MEMCANAL_DIR/hypervisor-patches/pager BUILD=$MEMCANAL_PAGER_BUILD
    sudo install -D -m 0755 $MEMCANAL_PAGER_BUILD/memcanal-pager $MEMCANAL_PAGER_BINARY
    # QEMU's user reads the shim and runs the wrapper.
    sudo install -D -m 0644 $MEMCANAL_PAGER_BUILD/libmemcanal-uffd.so $MEMCANAL_LIB_DIR/libmemcanal-uffd.so
    sudo install -D -m 0755 $MEMCANAL_DIR/hypervisor-patches/pager/memcanal-qemu $MEMCANAL_LIB_DIR/qemu/qemu-system-x86_64
    printf 'QEMU=%s\nSHIM=%s\nSOCKET_DIR=%s\n' $MEMCANAL_QEMU \
        $MEMCANAL_LIB_DIR/libmemcanal-uffd.so $MEMCANAL_PAGER_SOCKET_DIR \
        | sudo tee $MEMCANAL_LIB_DIR/qemu/memcanal-qemu.conf >/dev/null
}

# configure_libvirt_for_memcanal - libvirtd runs the wrapper (first on
# its PATH: nova's domains name no emulator), and QEMU's user creates
# its userfaultfd through /dev/userfaultfd; libvirtd restarted.
function configure_libvirt_for_memcanal {
    local unit
    for unit in libvirtd virtqemud; do
        sudo mkdir -p $SYSTEMD_DIR/$unit.service.d
        iniset -sudo $SYSTEMD_DIR/$unit.service.d/memcanal.conf Service Environment "PATH=$MEMCANAL_LIB_DIR/qemu:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    done
    echo 'KERNEL=="userfaultfd", GROUP="kvm", MODE="0660"' \
        | sudo tee $MEMCANAL_UDEV_RULES_DIR/60-memcanal-userfaultfd.rules >/dev/null
    # What the rule gives the device when it is next created, now.
    sudo chgrp kvm $MEMCANAL_USERFAULTFD_DEVICE
    sudo chmod 0660 $MEMCANAL_USERFAULTFD_DEVICE
    if ! grep -q '^cgroup_device_acl.*/dev/userfaultfd' $MEMCANAL_QEMU_CONF; then
        # libvirt's default list, and the device.
        echo 'cgroup_device_acl = [ "/dev/null", "/dev/full", "/dev/zero", "/dev/random", "/dev/urandom", "/dev/ptmx", "/dev/kvm", "/dev/userfaultfd" ]' \
            | sudo tee -a $MEMCANAL_QEMU_CONF >/dev/null
    fi
    $SYSTEMCTL daemon-reload
    restart_service libvirtd
}

# memcanal_nova_reserved_mb - nova.conf's reserved_host_memory_mb, or
# nova's default.
function memcanal_nova_reserved_mb {
    local reserved
    reserved=$(iniget $NOVA_CONF DEFAULT reserved_host_memory_mb)
    echo ${reserved:-512}
}

# memcanal_set_auth FILE SECTION USERNAME - keystoneauth's password
# options, for one service reaching another as USERNAME.
function memcanal_set_auth {
    local file=$1 section=$2 username=$3
    iniset $file $section auth_type password
    iniset $file $section auth_url $KEYSTONE_SERVICE_URI
    iniset $file $section username $username
    iniset $file $section password $SERVICE_PASSWORD
    iniset $file $section user_domain_name $SERVICE_DOMAIN_NAME
    iniset $file $section project_name $SERVICE_PROJECT_NAME
    iniset $file $section project_domain_name $SERVICE_DOMAIN_NAME
    iniset $file $section region_name $REGION_NAME
}

# write_memcanal_conf - memcanal.conf, read by every memcanal process.
function write_memcanal_conf {
    sudo install -d -o $STACK_USER $MEMCANAL_CONF_DIR
    install -d $MEMCANAL_STATE_PATH
    rm -f $MEMCANAL_CONF
    iniset $MEMCANAL_CONF DEFAULT debug $ENABLE_DEBUG_LOG_LEVEL
    iniset $MEMCANAL_CONF DEFAULT state_path $MEMCANAL_STATE_PATH
    iniset_rpc_backend memcanal $MEMCANAL_CONF
    # lib/database knows no database type on a compute node that runs
    # none, and the agent reaches the service over RPC only.
    if is_service_enabled memcanal-api memcanal-service; then
        iniset $MEMCANAL_CONF database connection "$(database_connection_url memcanal)"
    fi
    iniset $MEMCANAL_CONF api auth_strategy $MEMCANAL_AUTH_STRATEGY
    configure_keystone_authtoken_middleware $MEMCANAL_CONF memcanal
    iniset $MEMCANAL_CONF agent driver $MEMCANAL_AGENT_DRIVER
    if memcanal_pages_guests; then
        iniset $MEMCANAL_CONF libvirt pager_socket_dir $MEMCANAL_PAGER_SOCKET_DIR
        # nova's, so memcanal's capacity is placement's (nova's default
        # when nova.conf sets none).
        iniset $MEMCANAL_CONF libvirt reserved_host_memory_mb "$(memcanal_nova_reserved_mb)"
        iniset $MEMCANAL_CONF pager binary $MEMCANAL_PAGER_BINARY
        iniset $MEMCANAL_CONF sampling enabled True
    fi
    if is_service_enabled memcanal-service; then
        create_memcanal_service_key
        iniset $MEMCANAL_CONF service signing_key $MEMCANAL_SERVICE_KEY
    fi
    if is_service_enabled memcanal-agent; then
        if [[ ! -e $MEMCANAL_SERVICE_PUBLIC_KEY ]] && ! is_service_enabled memcanal-service; then
            warn $LINENO "$MEMCANAL_SERVICE_PUBLIC_KEY is missing: copy it from the memcanal-service node, or memcanal-agent refuses every action"
        fi
        iniset $MEMCANAL_CONF agent service_public_key $MEMCANAL_SERVICE_PUBLIC_KEY
    fi
    # The service live-migrates through nova and sets allocation ratios
    # in placement when those features are enabled.
    memcanal_set_auth $MEMCANAL_CONF nova memcanal
    memcanal_set_auth $MEMCANAL_CONF placement memcanal
    setup_logging $MEMCANAL_CONF
}

# create_memcanal_service_key - the service's key pair, once (a key is
# never replaced: agents and memory servers hold its public half).
function create_memcanal_service_key {
    if [[ ! -e $MEMCANAL_SERVICE_KEY ]]; then
        $MEMCANAL_BIN_DIR/memcanal-manage service create-key \
            --private $MEMCANAL_SERVICE_KEY --public $MEMCANAL_SERVICE_PUBLIC_KEY
    fi
}

# write_memcanal_uwsgi_conf - uwsgi serving the API on its own port:
# devstack's write_uwsgi_config with its http argument set, so no
# apache proxy; the module form needs devstack 2024.2 or later. uwsgi is
# devstack's, in the same Python environment as memcanal, as for
# devstack's own API services.
function write_memcanal_uwsgi_conf {
    local address=$MEMCANAL_SERVICE_LISTEN_ADDRESS
    if [[ $address == *:* ]]; then
        address="[$address]"
    fi
    write_uwsgi_config "$MEMCANAL_UWSGI_CONF" memcanal.wsgi.api:application \
        "" "$address:$MEMCANAL_SERVICE_PORT" memcanal-api
    iniset $MEMCANAL_UWSGI_CONF uwsgi processes $MEMCANAL_API_WORKERS
    iniset $MEMCANAL_UWSGI_CONF uwsgi env OS_MEMCANAL_CONFIG_FILES=$MEMCANAL_CONF
}

# create_memcanal_accounts - the service user and the catalog entry
# nova's scheduler finds memcanal by (service type memcanal).
function create_memcanal_accounts {
    # admin: the service live-migrates to named hosts through nova.
    create_service_user memcanal admin
    get_or_create_service memcanal memcanal "Measured VM memory demand"
    get_or_create_endpoint memcanal "$REGION_NAME" "$(memcanal_api_url)"
}

function init_memcanal_db {
    recreate_database memcanal
    $MEMCANAL_BIN_DIR/memcanal-manage --config-file $MEMCANAL_CONF db sync
}

# memcanal_nova_list_add OPTION DEFAULT VALUE - add VALUE to the
# multi-valued [filter_scheduler] OPTION of nova.conf once, keeping what
# is there (nova's DEFAULT when nothing is).
function memcanal_nova_list_add {
    local option=$1 default=$2 value=$3
    local values
    # devstack's iniget_multiline prints every value on one line,
    # separated by spaces.
    values=$(iniget_multiline $NOVA_CONF filter_scheduler $option)
    values=${values:-$default}
    if [[ " $values " != *" $value "* ]]; then
        iniset_multiline $NOVA_CONF filter_scheduler $option $values $value
    fi
}

# configure_nova_for_memcanal - the scheduler filter and weigher, and how
# the scheduler reaches memcanal's API; safe to run again.
function configure_nova_for_memcanal {
    # stack.sh runs lib/neutron's configure_neutron_nova in the background
    # until after post-config, and it edits nova.conf too: two editors at
    # once lose each other's lines (stack.sh's own note on its
    # key_manager edit). Returns at once when it was never started.
    async_wait configure_neutron_nova
    local filters
    filters=$(iniget $NOVA_CONF filter_scheduler enabled_filters)
    filters=${filters:-$NOVA_FILTERS}
    if [[ ,$filters, != *,MemCanalFilter,* ]]; then
        iniset $NOVA_CONF filter_scheduler enabled_filters "$filters,MemCanalFilter"
    fi
    memcanal_nova_list_add available_filters nova.scheduler.filters.all_filters $MEMCANAL_FILTER
    memcanal_nova_list_add weight_classes nova.scheduler.weights.all_weighers $MEMCANAL_WEIGHER
    # GET /hosts is admin-only: nova's service user has the admin role.
    memcanal_set_auth $NOVA_CONF memcanal nova
    iniset $NOVA_CONF memcanal service_type memcanal
}

function start_memcanal {
    run_process memcanal-api "$(which uwsgi) --procname-prefix memcanal --ini $MEMCANAL_UWSGI_CONF"
    if is_service_enabled memcanal-api; then
        echo "Waiting for memcanal-api to start..."
        if ! wait_for_service $SERVICE_TIMEOUT $(memcanal_api_url); then
            die $LINENO "memcanal-api did not start"
        fi
    fi
    run_process memcanal-service "$MEMCANAL_BIN_DIR/memcanal-service --config-file $MEMCANAL_CONF"
    if is_service_enabled memcanal-agent; then
        memcanal_agent_keeps_its_pagers
    fi
    run_process memcanal-agent "$MEMCANAL_BIN_DIR/memcanal-agent --config-file $MEMCANAL_CONF"
}

# The pagers the agent starts outlive it (doc/paging.md): a restart of
# its unit must not kill them with the unit's control group, or their
# guests hang on paged-out pages until a new pager takes over.
function memcanal_agent_keeps_its_pagers {
    local dropin=$SYSTEMD_DIR/devstack@memcanal-agent.service.d
    sudo mkdir -p $dropin
    iniset -sudo $dropin/memcanal.conf Service KillMode process
}

function stop_memcanal {
    local service
    for service in memcanal-api memcanal-service memcanal-agent; do
        stop_process $service
    done
}

function cleanup_memcanal {
    sudo rm -rf $MEMCANAL_CONF_DIR $MEMCANAL_STATE_PATH
}

if is_service_enabled memcanal-api memcanal-service memcanal-agent; then
    if [[ $1 == stack && $2 == pre-install ]]; then
        if is_service_enabled memcanal-agent; then
            check_memcanal_agent_driver
        fi
    elif [[ $1 == stack && $2 == install ]]; then
        echo_summary "Installing memcanal"
        install_memcanal
        if memcanal_pages_guests; then
            install_memcanal_paging
        fi
    elif [[ $1 == stack && $2 == post-config ]]; then
        echo_summary "Configuring memcanal"
        write_memcanal_conf
        if memcanal_pages_guests; then
            configure_libvirt_for_memcanal
        fi
        if is_service_enabled memcanal-api; then
            write_memcanal_uwsgi_conf
            create_memcanal_accounts
        fi
        if is_service_enabled memcanal-service; then
            init_memcanal_db
        fi
        if is_service_enabled n-sch && [[ $MEMCANAL_NOVA_SCHEDULER == True ]]; then
            configure_nova_for_memcanal
        fi
    elif [[ $1 == stack && $2 == extra ]]; then
        echo_summary "Starting memcanal"
        start_memcanal
    elif [[ $1 == stack && $2 == test-config ]]; then
        if is_service_enabled tempest; then
            iniset $TEMPEST_CONFIG service_available memcanal True
        fi
    fi

    if [[ $1 == unstack ]]; then
        stop_memcanal
    fi

    if [[ $1 == clean ]]; then
        cleanup_memcanal
    fi
fi
