"""``openstack memcanal ...``: memcanal's OpenStackClient plugin.

``plugin`` is what OSC loads (entry point ``openstack.cli.extension``),
``client`` talks to the API with the session OSC authenticated, ``v1``
holds the commands (entry points ``openstack.memcanal.v1``) and
``display`` how sizes and curves are shown. See doc/cli.md.
"""
