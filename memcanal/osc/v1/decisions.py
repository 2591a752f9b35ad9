"""``openstack memcanal decision list|show|approve|reject|rollback``
(API 1.1)."""

import itertools

from cliff import columns
from osc_lib.cli import parseractions
from osc_lib.command import command

from memcanal.osc import display
from memcanal.osc.v1 import hosts

LIST_COLUMNS = ('UUID', 'Host', 'Kind', 'Policy', 'Mode', 'State',
                'Created At')


class ActionsColumn(columns.FormattableColumn):
    """One line per action in tables: what it does to which VM, and how
    far it got."""

    def human_readable(self):
        lines = []
        for action in self._value:
            if 'target_bytes' in action and action['instance_uuid']:
                what = '%s %s: %s -> %s MiB' % (
                    action['kind'], action['instance_uuid'],
                    display.mib(action.get('previous_bytes')),
                    display.mib(action['target_bytes']))
            else:
                what = '%s %s' % (action['kind'],
                                  action['instance_uuid'] or '')
            lines.append('%s [%s]%s' % (
                what, action['state'],
                ' %s' % action['error'] if action.get('error') else ''))
        return '\n'.join(lines)

    def machine_readable(self):
        return self._value


class EventsColumn(columns.FormattableColumn):
    """One line per state change in tables: when, what, who, why."""

    def human_readable(self):
        return '\n'.join(
            '%s %s -> %s%s%s' % (
                event['created_at'], event['from_state'] or '-',
                event['to_state'],
                ' by %s' % event['user_id'] if event['user_id'] else '',
                ': %s' % event['reason'] if event['reason'] else '')
            for event in self._value)

    def machine_readable(self):
        return self._value


_FORMATTED = {'inputs': display.JSONColumn, 'outputs': display.JSONColumn,
              'actions': ActionsColumn, 'events': EventsColumn}


def _client(app):
    client = app.client_manager.memcanal
    client.require('1.1', 'Decisions')
    return client


def shown(decision):
    fields = {key: _FORMATTED.get(key, lambda value: value)(value)
              for key, value in decision.items()}
    return tuple(zip(*sorted(fields.items())))


class ListDecision(command.Lister):
    """List decisions, newest first."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        # The API validates states (its 400 lists them) and the kinds are
        # open-ended, so neither is a fixed choice here.
        parser.add_argument('--state', metavar='<state>',
                            help='Only decisions in this state '
                                 '(recommended, approved, applied, ...)')
        parser.add_argument('--kind', metavar='<kind>',
                            help='Only decisions of this kind '
                                 '(memory_targets, migration, '
                                 'allocation_ratio, pooling)')
        parser.add_argument('--host', metavar='<host>',
                            help='Only this host\'s decisions (name or '
                                 'UUID)')
        parser.add_argument('--limit', metavar='<count>', type=int,
                            action=parseractions.NonNegativeAction,
                            help='Only the newest <count> decisions '
                                 '(default: every page; the service '
                                 'decides every few minutes)')
        return parser

    def take_action(self, parsed_args):
        client = _client(self.app)
        params = {}
        if parsed_args.state:
            params['state'] = parsed_args.state
        if parsed_args.host:
            params['host'] = hosts.host_uuid(client, parsed_args.host)
        if parsed_args.limit is not None:
            params['limit'] = parsed_args.limit
        # The API filters by host and state, not kind: pages are read
        # until --limit decisions of the kind are found.
        decisions = itertools.islice(
            (d for d in client.iterate('/decisions', 'decisions', params)
             if parsed_args.kind in (None, d['kind'])), parsed_args.limit)
        names = hosts.host_names(client)
        return LIST_COLUMNS, [
            (d['uuid'], names.get(d['host_uuid'], d['host_uuid']),
             d['kind'], d['policy'], d['mode'], d['state'], d['created_at'])
            for d in decisions]


class ShowDecision(command.ShowOne):
    """Show a decision with its inputs, outputs, actions and events."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('decision', metavar='<decision>',
                            help='Decision UUID')
        return parser

    def take_action(self, parsed_args):
        return shown(_client(self.app).get(
            '/decisions/%s' % parsed_args.decision))


class _Transition(ShowDecision):
    request = None

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('--reason', metavar='<text>',
                            help='Why, recorded in the decision\'s events')
        return parser

    def take_action(self, parsed_args):
        body = ({'reason': parsed_args.reason} if parsed_args.reason
                else None)
        return shown(_client(self.app).post(
            '/decisions/%s/%s' % (parsed_args.decision, self.request), body))


class ApproveDecision(_Transition):
    """Approve a recommended decision: the service carries it out."""

    request = 'approve'


class RejectDecision(_Transition):
    """Reject a recommended decision."""

    request = 'reject'


class RollbackDecision(_Transition):
    """Roll back an applied or failed decision, restoring its VMs."""

    request = 'rollback'
