"""Options of rolling upgrades: the RPC versions a process may send
(doc/upgrades.md)."""

from oslo_config import cfg

VERSION_PATTERN = r'^\d+\.\d+$'

upgrade_levels_group = cfg.OptGroup(
    'upgrade_levels', title='RPC version caps for rolling upgrades',
    help='While some processes still run the previous release, the new '
         'ones must send only what the old ones can read: each option caps '
         'the RPC version a client sends to the processes named, nova\'s '
         '[upgrade_levels] pattern. Set them on the upgraded processes '
         'until every process of the other side runs the new release, '
         'then remove them and restart (doc/upgrades.md). Unset: the '
         'newest version this release speaks.')

upgrade_levels_opts = [
    cfg.StrOpt('agent', regex=VERSION_PATTERN,
               help='Highest version of the service -> agent RPC API '
                    '(memcanal.rpc.agent_api) memcanal-service sends, '
                    'e.g. 1.2: the version of the oldest agent still '
                    'running.'),
    cfg.StrOpt('service', regex=VERSION_PATTERN,
               help='Highest version of the agent -> service RPC API '
                    '(memcanal.rpc.service_api) memcanal-agent sends, '
                    'e.g. 1.5: the version of the oldest service process '
                    'still running (agents upgraded first; the usual order '
                    'upgrades the services first and needs no cap here).'),
]


def register_opts(conf):
    conf.register_group(upgrade_levels_group)
    conf.register_opts(upgrade_levels_opts, group=upgrade_levels_group)


def list_opts():
    return {upgrade_levels_group: upgrade_levels_opts}
