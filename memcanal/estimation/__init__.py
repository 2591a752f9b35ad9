"""Pure algorithms on guest page-reference streams (numpy, no OpenStack).

- ``traces``: the trace format and its files (npy, text, oracleGeneral);
- ``workloads``: the papers' workloads, with their true working sets;
- ``logsim``: what PML and PRL log buffers would give the hypervisor;
- ``wss``: the PRL, PML and ESX working-set estimators;
- ``mrc``: exact, SHARDS and AET miss-ratio curves (``_lru.c`` holds the
  per-reference loops);
- ``sampling``: working sets, a fault-rate curve and cold-page ages from
  the first touches a pager's access sampling sees;
- ``observer``: the pipeline of all of them for one VM, which the agent,
  memcanal-trace and the benchmarks share.

See doc/estimation.md.
"""

PAGE_SIZE = 4096
