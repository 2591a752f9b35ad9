"""memcanal inside nova's scheduler: a filter and a weigher that place
VMs by the memory they measurably use rather than by flavor size.

Both read memcanal's REST API (``client``), configured in nova.conf's
``[memcanal]`` group (``conf``), and decide with the same
``memcanal.policy.demand`` rules as memcanal's own migration planner, so
that nova never places a VM where memcanal would move it away from.
Nothing here imports eventlet: nova may run on native threads.
"""
