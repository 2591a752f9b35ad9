"""What nova's scheduler reads from memcanal's API, cached per process.

A scheduler process places many VMs a second over a few threads, and its
filter and weigher look at every host for each: they read one
``Snapshot`` of memcanal's hosts and demand ratios, fetched at most once
per ``[memcanal] cache_seconds`` by whichever thread finds it stale (the
others wait for that one fetch rather than start their own). A failed
fetch is remembered for the same period, as "unreachable", so that a
memcanal outage costs the scheduler one timeout per period, not one per
request, and its warning is logged once per period.
"""

import dataclasses
import logging
import threading
import time

from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import loading as ks_loading

from memcanal.nova import conf as memcanal_conf
from memcanal.policy import demand

LOG = logging.getLogger(__name__)

MIB = 2 ** 20
# The version that gives hosts their measured demand and the demand
# ratios.
MICROVERSION = '1.4'
HEADERS = {'OpenStack-API-Version': 'memcanal %s' % MICROVERSION}


@dataclasses.dataclass(frozen=True)
class Snapshot:
    """memcanal's view of the cloud at one moment.

    ``hosts``: memcanal's host records by name; ``flavor_ratios`` and
    ``project_ratios``: measured demand over flavor memory, by flavor
    name and by project id.
    """

    hosts: dict
    flavor_ratios: dict
    project_ratios: dict

    @classmethod
    def from_api(cls, hosts_body, ratios_body):
        def ratios(group):
            return {key: float(value['ratio'])
                    for key, value in (ratios_body.get(group) or {}).items()
                    if value.get('ratio') is not None}
        return cls(hosts={h['name']: h for h in hosts_body['hosts']},
                   flavor_ratios=ratios('flavors'),
                   project_ratios=ratios('projects'))

    def host_load(self, host_state):
        """The HostLoad of nova's ``host_state``, matched by its compute
        service host name, else its node name; None for a host memcanal
        does not know or reports down."""
        for name in (host_state.host, host_state.nodename):
            host = self.hosts.get(name)
            if host is not None:
                break
        else:
            return None
        if host.get('state') != 'up':
            return None
        return demand.HostLoad(name=host['name'],
                               capacity_bytes=int(host['capacity_bytes']),
                               demand_bytes=int(host['demand_bytes']))

    def expected_demand(self, spec_obj):
        """The new VM's expected demand, in bytes: its flavor's memory
        times the flavor's measured ratio, else its project's, else 1
        (all of it, as nova would assume)."""
        flavor = spec_obj.flavor
        ratio = self.flavor_ratios.get(flavor.name)
        if ratio is None:
            ratio = self.project_ratios.get(spec_obj.project_id, 1.0)
        return int(flavor.memory_mb * MIB * ratio)


class Client:
    """memcanal's API through a keystoneauth adapter, from ``conf``'s
    ``[memcanal]`` group; ``snapshot()`` is safe from any thread."""

    def __init__(self, conf, clock=time.monotonic):
        self.conf = conf
        self._clock = clock
        self._lock = threading.Lock()
        self._adapter = None
        self._snapshot = None
        self._expires = None

    def _get_adapter(self):
        if self._adapter is None:
            group = memcanal_conf.GROUP
            auth = ks_loading.load_auth_from_conf_options(self.conf, group)
            session = ks_loading.load_session_from_conf_options(
                self.conf, group, auth=auth)
            self._adapter = ks_loading.load_adapter_from_conf_options(
                self.conf, group, session=session, auth=auth)
        return self._adapter

    def _get(self, path):
        response = self._get_adapter().get(path, headers=HEADERS,
                                           raise_exc=True)
        return response.json()

    def fetch(self):
        """A fresh Snapshot from the API (raises on any failure)."""
        return Snapshot.from_api(self._get('/hosts'),
                                 self._get('/demand_ratios'))

    def snapshot(self):
        """The cached Snapshot, fetched again when older than
        ``cache_seconds``; None while the API cannot be reached."""
        with self._lock:
            now = self._clock()
            if self._expires is not None and now < self._expires:
                return self._snapshot
            try:
                self._snapshot = self.fetch()
            except (ks_exc.ClientException, ValueError, KeyError,
                    TypeError) as exc:
                # ClientException covers connection failures, timeouts,
                # a missing endpoint and HTTP errors; the others a body
                # that is not what 1.4 promises.
                LOG.warning('memcanal API unavailable (%s); its filter '
                            'passes and its weigher ignores every host '
                            'for the next %d s.', exc,
                            self.conf.memcanal.cache_seconds)
                self._snapshot = None
            self._expires = now + self.conf.memcanal.cache_seconds
            return self._snapshot


_clients = {}
_clients_lock = threading.Lock()


def get_client(conf):
    """The process's Client for ``conf``, shared by the filter and the
    weigher (and so is its cache); registers ``[memcanal]`` on first
    use."""
    with _clients_lock:
        client = _clients.get(id(conf))
        if client is None:
            memcanal_conf.register_opts(conf)
            client = _clients[id(conf)] = Client(conf)
        return client


def reset():
    """Forget every process-wide client (tests)."""
    with _clients_lock:
        _clients.clear()
