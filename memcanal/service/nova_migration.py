"""Live migrations through nova's API, for the decisions that move a VM.

``NovaMigrator.start`` asks nova to live-migrate a server to a named
compute host and ``poll`` says how that is going, from what nova says of
the server alone: its compute host, status and task state. Neither keeps
state between calls, so a service that restarted half way (or two
service processes) can start the same move again and poll it: starting a
move already under way, or already done, changes nothing.

nova is reached with openstacksdk, from the ``[nova]`` keystoneauth
options (memcanal.conf.nova); openstacksdk is imported only when a
migrator is built from configuration, so that memcanal runs without it
until live migration is used.
"""

from keystoneauth1 import loading as ks_loading

APPLIED = 'applied'
IN_PROGRESS = 'in_progress'
FAILED = 'failed'

# nova's server states while a live migration is under way: the API sets
# the task state before it answers the request, the compute host the
# status once the migration runs.
_MIGRATING_STATUS = 'MIGRATING'
_MIGRATING_TASK = 'migrating'


def connect(conf):
    """An openstacksdk Connection from ``conf``'s [nova] group."""
    import openstack.connection

    auth = ks_loading.load_auth_from_conf_options(conf, 'nova')
    session = ks_loading.load_session_from_conf_options(conf, 'nova',
                                                        auth=auth)
    return openstack.connection.Connection(
        session=session, oslo_conf=conf, service_types=['compute'])


def _is_migrating(server):
    return (server.status == _MIGRATING_STATUS
            or server.task_state == _MIGRATING_TASK)


class NovaMigrator:
    """Starts and follows live migrations over ``connection`` (an
    openstacksdk Connection with nova's admin rights, which name compute
    hosts)."""

    def __init__(self, connection):
        self.connection = connection

    @classmethod
    def from_conf(cls, conf):
        return cls(connect(conf))

    def start(self, server_uuid, destination_host):
        """Ask nova to live-migrate the server to ``destination_host``
        (block migration where there is no shared storage, as nova
        decides), unless it is already there or migrating. Raises
        openstacksdk's exceptions when nova refuses the request (404 for
        a server that is gone, 409 for one in a state that cannot
        migrate, 400 for an unknown host)."""
        compute = self.connection.compute
        server = compute.get_server(server_uuid)
        if server.compute_host == destination_host or _is_migrating(server):
            return
        compute.live_migrate_server(server, host=destination_host,
                                    block_migration='auto')

    def poll(self, server_uuid, destination_host):
        """(state, error): ('applied', None) once the server runs on
        ``destination_host``; ('in_progress', None) while it migrates;
        ('failed', why) when it is in error, gone, or settled elsewhere
        (nova moved it back after a failure, e.g. a destination that
        refused it)."""
        try:
            server = self.connection.compute.get_server(server_uuid)
        except Exception as exc:
            # openstacksdk's NotFoundException, named by its status so
            # that this module imports openstacksdk only to connect.
            if getattr(exc, 'status_code', None) != 404:
                raise
            return FAILED, 'server %s is gone' % server_uuid
        if server.status == 'ERROR':
            fault = (server.fault or {}).get('message') or 'no fault given'
            return FAILED, 'server is in ERROR: %s' % fault
        if _is_migrating(server):
            return IN_PROGRESS, None
        if server.compute_host == destination_host:
            return APPLIED, None
        return FAILED, ('server is %s on %s, not on %s' % (
            server.status, server.compute_host, destination_host))

    def server_groups(self):
        """{group id: (policy, member server uuids)} of every project's
        server groups, for the planner to keep each group's (anti-)
        affinity; ``policy`` from microversion 2.64, ``policies`` before."""
        groups = {}
        for group in self.connection.compute.server_groups(
                all_projects=True):
            policy = group.policy or next(iter(group.policies or ()), None)
            groups[group.id] = (policy, tuple(group.member_ids or ()))
        return groups
