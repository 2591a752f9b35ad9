"""Leases that end (issue #36): the service issues each lease token for
[pooling] lease_lifetime seconds, renews the tokens of live leases
before they expire, and has lenders revoke the leases that ended.

- Issue: a page action's tokens (memcanal.service.actions) and every
  renewal are signed here, good from now for the lease lifetime; the
  token's lease uuid stays the uuid of the action that made the lease,
  so its memory server keeps one account (and its pages) for it.
- Renew: every third of the lifetime, each lease whose borrower is up
  gets fresh tokens, cast to the borrower's agent sealed to its host key
  (agent RPC 1.4, renew_leases); its pager says HELLO with them at once.
  A borrower that is down gets none: its lease's tokens expire, and its
  memory server gives the pages back after its --orphan-grace.
- Revoke: a lease that ended (its pages came back, it moved to another
  server, its VM was deleted: memcanal.db.pooling) is cast to the
  lender's agent (revoke_leases) at every run until its tokens would
  have expired anyway; the agent has its memory server drop the pages
  and refuse the tokens (REVOKE on the admin socket).

Agents capped below 1.4 ([upgrade_levels] agent) get neither cast: their
leases' tokens expire on their own, and renewals wait for the upgrade.
"""

import datetime
import time

from oslo_log import log as logging
import oslo_messaging as messaging
from oslo_utils import timeutils

from memcanal.db import api as db_api
from memcanal.db import decisions as decisions_db
from memcanal.db import pooling as pooling_db
from memcanal import estimation
from memcanal import owners
from memcanal.service import lease_tokens

LOG = logging.getLogger(__name__)
# What a memory server allows of clock skew (LEASE_CLOCK_SKEW): a
# revocation is kept that much longer than the tokens it ends.
CLOCK_SKEW = 60


def sign_tokens(signing_key, lifetime, lease_uuid, instance_uuid,
                lent_bytes, borrower, stores, now=None):
    """{store: base64 token} of the ``tls:`` stores of a lease: for the
    VM's pages, as many as it lends, to ``borrower`` on that server,
    good from ``now`` (unix seconds) for ``lifetime`` seconds.
    ValueError when a name does not fit a token."""
    issued_at = int(time.time() if now is None else now)
    quota = -(-lent_bytes // estimation.PAGE_SIZE)
    return {
        store: lease_tokens.encode(lease_tokens.sign(
            signing_key, lease_uuid, owners.owner_of(instance_uuid), quota,
            borrower, store[len(decisions_db.TLS_STORE):], issued_at,
            lifetime))
        for store in stores if store.startswith(decisions_db.TLS_STORE)}


class LeaseUpkeep:
    """The periodic jobs of leases: ``agent_api(context)`` gives the
    dispatcher's AgentAPI (its cap), ``signing_key`` the service's."""

    def __init__(self, conf, signing_key, agent_api):
        self.conf = conf
        self.signing_key = signing_key
        self.agent_api = agent_api

    @property
    def lifetime(self):
        return self.conf.pooling.lease_lifetime

    def renewal_interval(self):
        return max(1, self.lifetime // 3)

    def _api(self, context):
        api = self.agent_api(context)
        if not api.can_end_leases:
            LOG.debug('[upgrade_levels] agent is below 1.4: leases are '
                      'neither renewed nor revoked by cast')
            return None
        return api

    def renew(self, context):
        """Periodic (every third of the lifetime): fresh tokens for each
        lease whose borrower is up; returns how many leases."""
        api = self._api(context)
        if api is None or self.signing_key is None:
            return 0
        by_host = {}
        for lease in pooling_db.live_leases(context):
            store = decisions_db.TLS_STORE + lease['address']
            try:
                tokens = sign_tokens(
                    self.signing_key, self.lifetime, lease['lease_uuid'],
                    lease['instance_uuid'], lease['lent_bytes'],
                    lease['borrower'], [store])
            except ValueError as error:
                LOG.error('Cannot renew the lease of %s: %s',
                          lease['instance_uuid'], error)
                continue
            by_host.setdefault(lease['borrower'], []).append({
                'instance_uuid': lease['instance_uuid'],
                'lease_tokens': tokens})
        renewed = 0
        for host, renewals in sorted(by_host.items()):
            identity = db_api.host_identity(context, host) or {}
            try:
                api.renew_leases(context, host, renewals,
                                 identity.get('public_key'))
            except (ValueError, messaging.MessagingException) as error:
                LOG.warning('Could not renew %d leases of %s (their tokens '
                            'expire unless a later run can): %s',
                            len(renewals), host, error)
                continue
            renewed += len(renewals)
        return renewed

    def revoke(self, context):
        """Periodic: tell each lender the leases it must revoke (again,
        until their tokens would have expired); returns how many."""
        forget_before = timeutils.utcnow() - datetime.timedelta(
            seconds=self.lifetime + CLOCK_SKEW)
        ended = pooling_db.revocations(context, forget_before)
        api = self._api(context) if ended else None
        if api is None:
            return 0
        sent = 0
        for host, revocations in sorted(ended.items()):
            try:
                api.revoke_leases(context, host, revocations)
            except messaging.MessagingException as error:
                LOG.warning('Could not revoke %d leases on %s (sent again '
                            'next run): %s', len(revocations), host, error)
                continue
            sent += len(revocations)
        return sent
