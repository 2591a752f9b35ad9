"""The owner id of a VM's pages: its key in memory servers, in the
host's pool and in its pages' authentication (the pager's ``--owner``,
the lease token's owner, the memory server's request header).

Pagers of every VM of the cloud may share one memory server, so the id
comes from the VM's uuid, not from its host: the first 63 bits of it,
which is what the wire format (a u64 the pager and the memory server
have carried since #17) and the pages already stored hold. 63 bits of a
uuid are not the uuid: two uuids can share them, and anybody who knows
a VM's uuid can make a twin. So the service keeps each owner id to one
VM (memcanal.db.claims refuses a report naming a VM whose owner id
another VM holds, ``report.owner_collision``, and a pooling decision is
made only for the one VM holding it); only then may a lease token name
it.
"""

import uuid


def owner_of(instance_uuid):
    """The VM's owner id: the first 63 bits of its uuid."""
    return int(uuid.UUID(instance_uuid).hex[:16], 16) >> 1
