"""``openstack memcanal host list|show|set`` (admitting to pooling: API
1.10)."""

from osc_lib.command import command
from osc_lib import exceptions
from oslo_utils import uuidutils

from memcanal.osc import display


def find_host(client, name_or_uuid):
    """The host named or identified by ``name_or_uuid`` (GET /hosts has
    no name filter; the list is short: one entry per compute node)."""
    if uuidutils.is_uuid_like(name_or_uuid):
        return client.get('/hosts/%s' % name_or_uuid)
    for host in client.get('/hosts')['hosts']:
        if host['name'] == name_or_uuid:
            return host
    raise exceptions.CommandError('No memcanal host is named %s.' %
                                  name_or_uuid)


def host_uuid(client, name_or_uuid):
    return find_host(client, name_or_uuid)['uuid']


def host_names(client):
    """{uuid: name} of every host, for lists to show names rather than
    UUIDs; empty for a user not allowed to list hosts (a project reader
    listing its VMs), whose lists keep the UUIDs."""
    try:
        return {host['uuid']: host['name']
                for host in client.get('/hosts')['hosts']}
    except exceptions.Forbidden:
        return {}


def _rounded(utilization):
    return None if utilization is None else round(utilization, 3)


LIST_COLUMNS = ('UUID', 'Name', 'State', 'Instances', 'Memory (MiB)',
                'Demand (MiB)', 'Demand 95 % (MiB)', 'Utilization')


class ListHost(command.Lister):
    """List the compute hosts running a memcanal agent."""

    def take_action(self, parsed_args):
        hosts = self.app.client_manager.memcanal.get('/hosts')['hosts']
        return LIST_COLUMNS, [
            (host['uuid'], host['name'], host['state'],
             host['instance_count'], display.mib(host['memory_total_bytes']),
             display.mib(host.get('demand_bytes')),
             display.IntervalColumn(display.interval_mib(
                 host.get('demand_bounds_bytes'))),
             _rounded(host.get('utilization')))
            for host in hosts]


class ShowHost(command.ShowOne):
    """Show a host, as the API does (sizes in bytes)."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('host', metavar='<host>',
                            help='Host name or UUID')
        return parser

    def take_action(self, parsed_args):
        host = find_host(self.app.client_manager.memcanal, parsed_args.host)
        return tuple(zip(*sorted(host.items())))


class SetHost(command.ShowOne):
    """Admit a host to memory pooling, or stop it.

    A host registers on first use with a key of its own: it neither
    borrows memory of other hosts nor lends its memory server's (even
    enabled) until an operator admits it. Stopping keeps what it lends
    or borrows until its VMs are taken back. PATCH /hosts/{uuid} (API
    1.10).
    """

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('host', metavar='<host>',
                            help='Host name or UUID')
        switch = parser.add_mutually_exclusive_group(required=True)
        switch.add_argument('--admit', dest='admitted', action='store_true',
                            default=None,
                            help='Let its VMs borrow and its memory server '
                                 'lend')
        switch.add_argument('--no-admit', dest='admitted',
                            action='store_false',
                            help='Borrow and lend nothing more')
        return parser

    def take_action(self, parsed_args):
        client = self.app.client_manager.memcanal
        client.require('1.10', 'Admitting hosts to memory pooling')
        uuid = host_uuid(client, parsed_args.host)
        host = client.patch('/hosts/%s' % uuid,
                            {'pooling_admitted': parsed_args.admitted})
        return tuple(zip(*sorted(host.items())))
