"""Memory policies: pure decisions on working sets, curves and statistics.

Each policy takes what the agents measured (miss-ratio curves, working-set
sizes, guest statistics) and returns an Allocation: a memory target per
VM with the miss ratio it predicts there. Nothing here touches a VM, the
database or the network, so the service, ``memcanal-plan`` and the
benchmarks run the very same code.

- ``isolated``: Lu and Shen's isolated sharing (Hcache, section 4.2).
- ``esx``: VMware ESX's proportional shares with an idle memory tax, its
  victims found from the curves (Hcache, section 4.2).
- ``utube``: Liu et al.'s dynamic balancing and overcommit admission
  (U-tube, equations 1-7).
- ``guardrails``: the limits every policy's output passes through.
"""
