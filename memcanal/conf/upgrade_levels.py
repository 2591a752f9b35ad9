"""Options of rolling upgrades: the RPC versions a process may send
(doc/upgrades.md)."""

from oslo_config import cfg

# Caps from the versions the other side's processes report
# (memcanal.db.rpc_versions), nova's ``auto``.
AUTO = 'auto'
VERSION_PATTERN = r'^(\d+\.\d+|auto)$'

upgrade_levels_group = cfg.OptGroup(
    'upgrade_levels', title='RPC version caps for rolling upgrades',
    help='While some processes still run the previous release, the new '
         'ones must send only what the old ones can read: each option caps '
         'the RPC version a client sends to the processes named, nova\'s '
         '[upgrade_levels] pattern. Set them on the upgraded processes '
         'until every process of the other side runs the new release, '
         'then remove them and restart (doc/upgrades.md). ``auto``: '
         'the oldest version the other side\'s processes reported '
         '(processes of a release before it are taken as the oldest '
         'version still spoken). Unset: the newest version this release '
         'speaks.')

upgrade_levels_opts = [
    cfg.StrOpt('agent', regex=VERSION_PATTERN,
               help='Highest version of the service -> agent RPC API '
                    '(memcanal.rpc.agent_api) memcanal-service sends, '
                    'e.g. 1.2: the version of the oldest agent still '
                    'running; auto: the oldest version the registered '
                    'hosts\' agents reported, read again every minute '
                    '(an agent that reported none: 1.2).'),
    cfg.StrOpt('service', regex=VERSION_PATTERN,
               help='Highest version of the agent -> service RPC API '
                    '(memcanal.rpc.service_api) memcanal-agent sends, '
                    'e.g. 1.5: the version of the oldest service process '
                    'still running (agents upgraded first; the usual order '
                    'upgrades the services first and needs no cap here); '
                    'auto: the oldest version of the running service '
                    'processes, as the service answers the agent\'s '
                    'registration (a service that does not say: 1.5).'),
]


def register_opts(conf):
    conf.register_group(upgrade_levels_group)
    conf.register_opts(upgrade_levels_opts, group=upgrade_levels_group)


def list_opts():
    return {upgrade_levels_group: upgrade_levels_opts}
