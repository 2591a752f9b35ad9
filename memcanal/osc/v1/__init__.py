"""The commands of ``openstack memcanal``, one module per resource."""
