"""memcanal.prometheus.ServedMetrics, as the agent's and the service's
RPC services use it (their tests call ``served_while_running``)."""

from unittest import mock

from prometheus_client import parser
import pytest
import requests

from memcanal.rpc import service as rpc_service


def served_while_running(service, port):
    """{name: family} that ``service`` (its RPC server mocked) serves on
    ``port`` while it runs; its port is closed once it stopped."""
    with mock.patch.object(rpc_service.RPCService, 'start'), \
            mock.patch.object(rpc_service.RPCService, 'stop'):
        service.start()
        try:
            response = requests.get('http://127.0.0.1:%d/metrics' % port,
                                    timeout=10)
        finally:
            service.stop()
    assert service.metrics_server is None
    with pytest.raises(requests.ConnectionError):
        requests.get('http://127.0.0.1:%d/metrics' % port, timeout=10)
    return {family.name: family for family in
            parser.text_string_to_metric_families(response.text)}
