"""Serving a process's own Prometheus registry on a port of its own.

memcanal-service ([service] metrics_port) and memcanal-agent ([agent]
metrics_port) each serve what happens in their process alone, so each
is a Prometheus target. The server is started once the process runs
its manager (after oslo.service forked: a server started before would
serve the parent's series, which never move) and stopped with it.
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
