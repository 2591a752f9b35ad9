"""The agent's side of leases that end (issue #36, agent RPC 1.4).

A borrower's agent hands its pagers the renewed tokens the service
sends before the old ones expire; a lender's agent has its memory server
end the leases the service revoked (REVOKE on the operator's admin
socket, memcanal.agent.memserver): their pages go back to the host and
their tokens are refused from then on. Both casts are checked by the
manager (signed for this host, fresh) before they get here.
"""

from oslo_log import log as logging

from memcanal.agent import memserver
from memcanal.agent import pager_client
from memcanal.agent import paging
from memcanal import exception
from memcanal.rpc import agent_api
from memcanal.rpc import sealing

LOG = logging.getLogger(__name__)


def renew(driver, host_key, renewals, metrics):
    """Give each VM's pager its renewed tokens (sealed to ``host_key``).
    A VM no longer paged here is skipped: its lease ends with it."""
    for renewal in renewals:
        uuid = renewal.get('instance_uuid')
        try:
            tokens = agent_api.unsealed(renewal, host_key)['lease_tokens']
            driver.renew_lease_tokens(uuid, tokens)
        except sealing.SealError as error:
            LOG.error('Lease renewal of %s refused: %s', uuid, error)
            metrics.refused('rpc.unsealable')
        except (exception.InstanceNotFound,
                pager_client.PagerError) as error:
            LOG.warning('Lease renewal of %s not applied: %s', uuid, error)
        else:
            LOG.info('Renewed the lease tokens of %s', uuid)


def revoke(admin_socket, revocations):
    """End leases on this host's memory server: each VM's pages go, and
    its tokens issued until ``revoked_at`` are refused. A failure is
    logged: the service sends a revocation again until the tokens it
    ends would have expired."""
    try:
        with memserver.connect_admin(admin_socket) as admin:
            for revocation in revocations:
                status, dropped = admin.revoke(
                    paging.owner_of(revocation['instance_uuid']),
                    int(revocation['revoked_at']))
                if status != memserver.OK:
                    LOG.warning('The memory server remembers too many '
                                'revoked leases: the tokens of %s are '
                                'refused only once they expire',
                                revocation['instance_uuid'])
                if dropped:
                    LOG.info('Revoked the lease of %s: %d pages given back',
                             revocation['instance_uuid'], dropped)
    except (OSError, memserver.MemserverError) as error:
        LOG.warning('Could not revoke %d leases on this host\'s memory '
                    'server (the service sends them again): %s',
                    len(revocations), error)
