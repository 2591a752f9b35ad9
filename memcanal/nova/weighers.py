"""MemCanalWeigher: prefer hosts whose measured demand leaves the most
room after the new VM.

Enable in nova.conf::

    [filter_scheduler]
    weight_classes = nova.scheduler.weights.all_weighers
    weight_classes = memcanal.nova.weighers.MemCanalWeigher

Its weight, before nova multiplies it by ``[memcanal] weight_multiplier``,
is in [0, 1], the mean of two terms:

- headroom: the host's capacity less its measured demand and the new
  VM's expected demand, in bytes, normalized over the hosts being weighed
  the way nova normalizes every weigher (the least 0, the most 1), so
  that a large host counts for the bytes it has free;
- utilization: 1 less the measured utilization the host would have with
  the VM (clipped to [0, 1]), already a fraction, so that a small host is
  not swamped by a large one's bytes.

Hosts memcanal does not know or reports down weigh 0 (those it measures
are preferred); while memcanal's API cannot be reached every host weighs
0, and the weigher changes nothing. ``minval``/``maxval`` 0 and 1 keep
nova's own normalization from stretching these weights again.
"""

from nova.scheduler import utils
from nova.scheduler import weights
from nova import weights as nova_weights
from oslo_config import cfg

from memcanal.nova import client
from memcanal.nova import conf as memcanal_conf


# nova's configuration has [memcanal] once nova loads this class.
memcanal_conf.register_opts(cfg.CONF)


class MemCanalWeigher(weights.BaseHostWeigher):
    minval = 0.0
    maxval = 1.0

    def weight_multiplier(self, host_state):
        return utils.get_weight_multiplier(
            host_state, 'memcanal_weight_multiplier',
            cfg.CONF.memcanal.weight_multiplier)

    def _weigh_object(self, host_state, weight_properties):
        # weigh_objects weighs all hosts at once; nova calls only that.
        return self.weigh_objects(
            [nova_weights.WeighedObject(host_state, 0.0)],
            weight_properties)[0]

    def weigh_objects(self, weighed_obj_list, spec_obj):
        snapshot = client.get_client(cfg.CONF).snapshot()
        if snapshot is None:
            return [0.0] * len(weighed_obj_list)
        new_demand = snapshot.expected_demand(spec_obj)
        loads = [snapshot.host_load(obj.obj) for obj in weighed_obj_list]
        after = [None if load is None else load.with_demand(new_demand)
                 for load in loads]
        known = [load for load in after if load is not None]
        headroom = nova_weights.normalize(
            [load.capacity_bytes - load.demand_bytes for load in known])
        headroom = iter(list(headroom))
        return [0.0 if load is None
                else (next(headroom)
                      + min(1.0, max(0.0, 1.0 - load.utilization))) / 2
                for load in after]
