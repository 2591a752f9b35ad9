#!/usr/bin/env bash
# Install (if missing) and start (if stopped) the real services memcanal's
# functional tests and production path use: RabbitMQ, MariaDB, PostgreSQL,
# and Redis (tooz's backend for several memcanal-service processes).
# Idempotent; listens on loopback only. Needs root for installs.
set -euo pipefail
. "$(dirname "$0")/apt.sh"

listening() { (echo > "/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wait_port() {
    local port=$1 what=$2
    for _ in $(seq 1 120); do
        listening "$port" && return 0
        sleep 0.5
    done
    echo "start-services: $what did not start listening on $port" >&2
    return 1
}

if ! listening 5672; then
    command -v rabbitmq-server >/dev/null || apt_install rabbitmq-server
    echo "start-services: starting RabbitMQ"
    RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 rabbitmq-server -detached
    wait_port 5672 RabbitMQ
fi

if ! listening 3306; then
    [ -x /usr/sbin/mariadbd ] || apt_install mariadb-server
    echo "start-services: starting MariaDB"
    mkdir -p /run/mysqld && chown mysql:mysql /run/mysqld
    start-stop-daemon --start --oknodo --background --make-pidfile \
        --pidfile /run/mysqld/mariadbd.pid --chuid mysql \
        --exec /usr/sbin/mariadbd -- --bind-address=127.0.0.1
    wait_port 3306 MariaDB
fi

if ! listening 5432; then
    command -v pg_ctlcluster >/dev/null || apt_install postgresql
    echo "start-services: starting PostgreSQL"
    version=$(ls /etc/postgresql | sort -n | tail -1)
    pg_ctlcluster --skip-systemctl-redirect "$version" main start
    wait_port 5432 PostgreSQL
fi
if ! listening 6379; then
    command -v redis-server >/dev/null || apt_install redis-server
    echo "start-services: starting Redis"
    redis-server --bind 127.0.0.1 --port 6379 --daemonize yes \
        --save '' --appendonly no
    wait_port 6379 Redis
fi
echo "start-services: RabbitMQ, MariaDB, PostgreSQL and Redis are listening"
