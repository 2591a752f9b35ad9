"""Where nova runs a VM, for a report naming a VM another host holds.

A report may describe only its own host's VMs (memcanal.db.claims): a
VM memcanal has on another host, which still lists it, moves to the
reporting host only when nova says it runs there. Asked only for such
VMs (during a live migration, both hosts list it), and only where the
service reaches nova ([nova] auth_type is set).
"""

from oslo_log import log as logging

from memcanal.service import nova_migration

LOG = logging.getLogger(__name__)


class NovaWhereabouts:
    def __init__(self, conf, connection=None):
        self.conf = conf
        self._connection = connection

    @staticmethod
    def configured(conf):
        return bool(conf.nova.auth_type)

    def host_of(self, server_uuid):
        """The compute host nova runs the server on; None when nova does
        not say (no such server, an error: the report's entry is then
        left out, as without nova)."""
        try:
            if self._connection is None:
                self._connection = nova_migration.connect(self.conf)
            return self._connection.compute.get_server(
                server_uuid).compute_host
        except Exception as error:
            LOG.warning('Could not ask nova where %s runs: %s', server_uuid,
                        error)
            return None
