"""memcanal's REST API: read-only views of hosts, VMs and their reports.

Modelled on openstack/placement: ``deploy.loadapp`` builds the WSGI
pipeline, ``handler`` routes to small handlers in ``handlers/``, errors
follow the API-SIG format (``errors``, ``util``) and authorization is
policy in code (``policies/``, ``policy``).
"""
