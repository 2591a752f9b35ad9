"""Serving a process's own Prometheus registry on a port of its own.

memcanal-service ([service] metrics_port) and memcanal-agent ([agent]
metrics_port) each serve what happens in their process alone, so each
is a Prometheus target. The server is started once the process runs
its manager (after oslo.service forked: a server started before would
serve the parent's series, which never move) and stopped with it:
``ServedMetrics`` does both for either service.
"""

import prometheus_client


def serve(registry, address, port):
    """Serve ``registry`` on ``address``:``port`` from a daemon thread
    (prometheus_client's own server, any path); returns the server."""
    server, _thread = prometheus_client.start_http_server(
        port, addr=address, registry=registry)
    return server


def stop(server):
    """Stop a server ``serve`` returned and free its port."""
    server.shutdown()
    server.server_close()


class ServedMetrics:
    """Mixin of an RPC service (memcanal.rpc.service.RPCService) whose
    manager keeps its metrics in ``manager.metrics.registry``: serves
    them while the service runs, when the ``metrics_port`` of its option
    group (``metrics_group``) is set, on its ``metrics_listen_address``.
    The server starts in ``start``, after the RPC server, so in the
    process oslo.service forked to run the manager."""

    metrics_group = None    # 'agent' or 'service'
    metrics_server = None

    def start(self):
        super().start()
        options = self.conf[self.metrics_group]
        if options.metrics_port:
            self.metrics_server = serve(
                self.manager.metrics.registry,
                options.metrics_listen_address, options.metrics_port)

    def stop(self, graceful=True):
        if self.metrics_server is not None:
            stop(self.metrics_server)
            self.metrics_server = None
        super().stop(graceful=graceful)
