"""``openstack memcanal memory server list|set`` (API 1.5; enabling
1.6)."""

from cliff import columns
from osc_lib.command import command
from osc_lib import exceptions

from memcanal.osc import display

LIST_COLUMNS = ('UUID', 'Host', 'Address', 'Enabled', 'Capacity (MiB)',
                'Lent (MiB)', 'Free (MiB)', 'Leases')


class LeasesColumn(columns.FormattableColumn):
    """One line per lease in tables: which VM of which host, how much."""

    def human_readable(self):
        return '\n'.join('%s of %s: %s MiB' % (
            lease['instance_uuid'], lease['borrower_host_name'],
            display.mib(lease['lent_bytes'])) for lease in self._value)

    def machine_readable(self):
        return self._value


def _servers(client):
    client.require('1.5', 'Memory servers')
    return client.get('/memory_servers')['memory_servers']


def find_server(client, uuid_or_host):
    """The memory server with that uuid, or the one of the host with that
    name or uuid (a host runs at most one)."""
    for server in _servers(client):
        if uuid_or_host in (server.get('uuid'), server['host_name'],
                            server['host_uuid']):
            return server
    raise exceptions.CommandError('No memory server is %s, nor runs on a '
                                  'host of that name or UUID.'
                                  % uuid_or_host)


class ListMemoryServer(command.Lister):
    """List the memory servers, whether each may lend, and its leases."""

    def take_action(self, parsed_args):
        return LIST_COLUMNS, [
            (server.get('uuid'), server['host_name'], server['address'],
             server.get('enabled'), display.mib(server['capacity_bytes']),
             display.mib(server['lent_bytes']),
             display.mib(server['free_bytes']),
             LeasesColumn(server['leases']))
            for server in _servers(self.app.client_manager.memcanal)]


class SetMemoryServer(command.ShowOne):
    """Let memory pooling lend from a memory server, or stop it.

    A host's agent registers its server disabled: it lends nothing until
    an operator enables it. Disabling keeps its leases until their VMs
    are taken back. PATCH /memory_servers/{uuid} (API 1.6).
    """

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('server', metavar='<server>',
                            help='Memory server UUID, or its host\'s name '
                                 'or UUID')
        switch = parser.add_mutually_exclusive_group(required=True)
        switch.add_argument('--enable', dest='enabled', action='store_true',
                            default=None,
                            help='Let memory pooling lend from it')
        switch.add_argument('--disable', dest='enabled',
                            action='store_false',
                            help='Lend nothing more from it')
        return parser

    def take_action(self, parsed_args):
        client = self.app.client_manager.memcanal
        client.require('1.6', 'Enabling memory servers')
        uuid = find_server(client, parsed_args.server)['uuid']
        server = client.patch('/memory_servers/%s' % uuid,
                              {'enabled': parsed_args.enabled})
        fields = dict(server, leases=LeasesColumn(server['leases']))
        return tuple(zip(*sorted(fields.items())))
