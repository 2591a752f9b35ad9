"""Compute nodes' MEMORY_MB allocation ratios in placement.

PlacementClient reads and writes a resource provider's inventory over a
keystoneauth1 Adapter; PlacementUpdater says what a host's ratio should
be (memcanal.policy.overcommit) and sets it.

Only ``allocation_ratio`` is memcanal's. nova-compute owns the rest of
the inventory (``total``, ``reserved``, ...) and rewrites it whenever it
changes, so an update puts every field back exactly as it was read, with
the provider generation it was read at. If nova-compute (or anyone)
wrote in between, placement refuses with 409 placement.concurrent_update
and the update reads again and retries: nova's ``reserved`` of the
moment is kept, never an older one.
"""

import math

from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import loading as ks_loading
from oslo_log import log as logging

from memcanal import exception
from memcanal.policy import guardrails
from memcanal.policy import overcommit

LOG = logging.getLogger(__name__)

MICROVERSION = '1.39'
MEMORY_MB = 'MEMORY_MB'
CONCURRENT_UPDATE = 'placement.concurrent_update'


class PlacementError(exception.MemcanalException):
    msg_fmt = 'placement: %(method)s %(url)s: %(reason)s'


class ProviderNotFound(exception.NotFound):
    msg_fmt = 'placement has no resource provider named %(name)s.'


class InventoryNotFound(exception.NotFound):
    msg_fmt = ('placement resource provider %(uuid)s has no '
               '%(resource_class)s inventory.')


class ConcurrentUpdate(PlacementError):
    msg_fmt = ('placement resource provider %(uuid)s changed during each of '
               '%(attempts)d attempts to set its %(resource_class)s '
               'allocation_ratio; not set.')


def _error_code(response):
    try:
        return response.json()['errors'][0].get('code')
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        return None


def same_ratio(a, b):
    """Equal as placement stores them: a MySQL FLOAT column keeps single
    precision, so 1.1 comes back as 1.10000002384."""
    return math.isclose(a, b, rel_tol=1e-6)


class PlacementClient:
    """Placement's API at microversion 1.39 through ``adapter``."""

    def __init__(self, adapter, attempts=5):
        self.adapter = adapter
        self.attempts = attempts

    @classmethod
    def from_conf(cls, conf):
        """A client from the [placement] options: auth, session and
        adapter as keystoneauth1 loads them."""
        # The group's name, not memcanal.conf's module: importing that
        # registers every memcanal option, which nova's scheduler and
        # functional tests (memcanal in nova's process) cannot have.
        group = 'placement'
        auth = ks_loading.load_auth_from_conf_options(conf, group)
        session = ks_loading.load_session_from_conf_options(
            conf, group, auth=auth)
        adapter = ks_loading.load_adapter_from_conf_options(
            conf, group, session=session, auth=auth)
        return cls(adapter, attempts=conf.placement.update_attempts)

    def _request(self, method, url, **kwargs):
        try:
            return self.adapter.request(url, method, microversion=MICROVERSION,
                                        raise_exc=False, **kwargs)
        except ks_exc.ClientException as exc:
            raise PlacementError(method=method, url=url, reason=exc)

    def _failed(self, method, url, response):
        return PlacementError(method=method, url=url, reason='%s %s' % (
            response.status_code, response.text[:500]))

    def provider(self, name):
        """The resource provider named ``name`` (a compute node's is its
        hypervisor host name): uuid, name, generation, ..."""
        url = '/resource_providers'
        response = self._request('GET', url, params={'name': name})
        if response.status_code != 200:
            raise self._failed('GET', url, response)
        providers = response.json()['resource_providers']
        if not providers:
            raise ProviderNotFound(name=name)
        return providers[0]

    def _inventory_url(self, uuid, resource_class):
        return '/resource_providers/%s/inventories/%s' % (uuid,
                                                          resource_class)

    def inventory(self, uuid, resource_class=MEMORY_MB):
        """The provider's inventory of ``resource_class``, with the
        ``resource_provider_generation`` it was read at."""
        url = self._inventory_url(uuid, resource_class)
        response = self._request('GET', url)
        if response.status_code == 404:
            raise InventoryNotFound(uuid=uuid, resource_class=resource_class)
        if response.status_code != 200:
            raise self._failed('GET', url, response)
        return response.json()

    def set_allocation_ratio(self, uuid, ratio, resource_class=MEMORY_MB):
        """Set the inventory's allocation_ratio to ``ratio``, every other
        field as read; retried on a concurrent update. A ratio already
        set is not written again.

        Returns previous_ratio, allocation_ratio, changed, generation
        (after the write) and attempts.
        """
        url = self._inventory_url(uuid, resource_class)
        for attempt in range(1, self.attempts + 1):
            inventory = self.inventory(uuid, resource_class)
            result = dict(resource_provider=uuid, attempts=attempt,
                          previous_ratio=inventory['allocation_ratio'],
                          allocation_ratio=ratio, changed=False,
                          generation=inventory['resource_provider_generation'])
            if same_ratio(inventory['allocation_ratio'], ratio):
                return result
            response = self._request(
                'PUT', url, json=dict(inventory, allocation_ratio=ratio))
            if response.status_code == 200:
                return dict(result, changed=True, generation=response.json()[
                    'resource_provider_generation'])
            if (response.status_code != 409
                    or _error_code(response) != CONCURRENT_UPDATE):
                raise self._failed('PUT', url, response)
            LOG.debug('Resource provider %s changed while its %s '
                      'allocation_ratio was set (attempt %d); reading it '
                      'again.', uuid, resource_class, attempt)
        raise ConcurrentUpdate(method='PUT', url=url, reason=None, uuid=uuid,
                               attempts=self.attempts,
                               resource_class=resource_class)


def guests_of(instances):
    """overcommit.Guest of the service's instance rows (flavor memory
    placement allocated, latest working set: the upper bound of a
    sampled one's 95 % interval)."""
    return [overcommit.Guest(instance['allocated_bytes'],
                             instance['demand_wss_bytes'])
            for instance in instances]


class PlacementUpdater:
    """What the service calls: a host's next ratio, and setting it."""

    def __init__(self, client, bounds=overcommit.Bounds(),
                 rails=guardrails.Rails()):
        self.client = client
        self.bounds = bounds
        self.rails = rails

    @classmethod
    def from_conf(cls, conf, rails=guardrails.Rails()):
        """From the [placement] options; ``rails`` the optimizer's (its
        kernel size is part of a VM's demand)."""
        options = conf.placement
        bounds = overcommit.Bounds(
            min_ratio=options.min_ratio, max_ratio=options.max_ratio,
            max_step=options.max_step, min_change=options.min_change,
            target_utilization=options.target_utilization,
            min_measured_instances=options.min_measured_instances)
        return cls(PlacementClient.from_conf(conf), bounds, rails)

    def proposal(self, host_name, guests):
        """overcommit.Proposal for the compute node named ``host_name``
        whose VMs are ``guests``, from the ratio placement holds now;
        its ``as_json()`` is the decision's inputs."""
        provider = self.client.provider(host_name)
        current = self.client.inventory(provider['uuid'])['allocation_ratio']
        return overcommit.propose(current, guests, self.bounds, self.rails)

    def desired_ratio(self, host_name, guests):
        """The ratio to set for ``host_name``, or None to leave it."""
        return self.proposal(host_name, guests).ratio

    def apply(self, host_name, ratio):
        """Set ``host_name``'s MEMORY_MB allocation_ratio to ``ratio``;
        safe to repeat. The result (set_allocation_ratio's, with host)
        goes to the decision's audit trail."""
        provider = self.client.provider(host_name)
        result = self.client.set_allocation_ratio(provider['uuid'], ratio)
        LOG.info('Host %s: MEMORY_MB allocation_ratio %s -> %s%s.',
                 host_name, result['previous_ratio'], ratio,
                 '' if result['changed'] else ' (already set)')
        return dict(result, host=host_name)
