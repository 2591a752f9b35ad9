"""MemCanalFilter: a host passes when its measured demand leaves room
for the new VM's expected demand.

Enable in nova.conf::

    [filter_scheduler]
    available_filters = nova.scheduler.filters.all_filters
    available_filters = memcanal.nova.filters.MemCanalFilter
    enabled_filters = ...,MemCanalFilter

It complements, not replaces, placement's MEMORY_MB claim: placement
still refuses a host whose flavors add up past its allocation ratio;
this filter refuses one whose VMs measurably use too much of it.
"""

from nova.scheduler import filters
from oslo_config import cfg

from memcanal.nova import client
from memcanal.nova import conf as memcanal_conf
from memcanal.policy import demand


# nova's configuration has [memcanal] once nova loads this class.
memcanal_conf.register_opts(cfg.CONF)


class MemCanalFilter(filters.BaseHostFilter):
    """A host passes when ``memcanal.policy.demand.accepts`` holds for it
    and the new VM's expected demand (see ``client.Snapshot``).

    Hosts memcanal does not know, or reports down, pass when
    ``[memcanal] pass_unknown_hosts``; every host passes while memcanal's
    API cannot be reached, so that its outage never stops scheduling.
    """

    # What the VM needs does not change on a rebuild on its own host.
    RUN_ON_REBUILD = False

    def host_passes(self, host_state, spec_obj):
        conf = cfg.CONF
        snapshot = client.get_client(conf).snapshot()
        if snapshot is None:
            return True
        load = snapshot.host_load(host_state)
        if load is None:
            return conf.memcanal.pass_unknown_hosts
        return demand.accepts(load, snapshot.expected_demand(spec_obj),
                              margin=conf.memcanal.margin,
                              threshold=conf.memcanal.threshold)
