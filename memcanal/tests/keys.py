"""Keys for tests: the service's pair, and agents that sign as hosts
(memcanal.rpc.signing)."""

from cryptography.hazmat.primitives.asymmetric import ed25519

from memcanal.rpc import signing

SERVICE_KEY = ed25519.Ed25519PrivateKey.generate()


def configure(conf, directory):
    """Give the service its key and agents its public key, as files in
    ``directory``; returns (private path, public path)."""
    private, public = (str(directory / 'service.key'),
                       str(directory / 'service.pub'))
    signing.write_key_pair(SERVICE_KEY, private, public)
    conf.set_override('signing_key', private, 'service')
    conf.set_override('service_public_key', public, 'agent')
    return private, public


def signed_decision(host, decision_uuid, actions, key=SERVICE_KEY):
    """apply_decision's keyword arguments, as the service sends them to
    ``host``'s agent (signed with ``key``)."""
    return signing.sign(key, 'apply_decision', {
        'host': host, 'decision_uuid': decision_uuid, 'actions': actions})


class Agent:
    """Calls the service manager's RPC methods as the agent of ``name``
    would, signed with its own key."""

    def __init__(self, name, key=None):
        self.name = name
        self.key = key or ed25519.Ed25519PrivateKey.generate()

    def args(self, method, **args):
        return signing.sign(self.key, method, dict(args, host=self.name))

    def call(self, manager, context, method, **args):
        return getattr(manager, method)(context, **self.args(method, **args))

    def register(self, manager, context, memory_total_bytes=2 ** 34,
                 memory_reserved_bytes=0, report_interval=60.0, **newer):
        """``newer``: arguments of later RPC versions (agent_version)."""
        return self.call(manager, context, 'register_host', name=self.name,
                         memory_total_bytes=memory_total_bytes,
                         memory_reserved_bytes=memory_reserved_bytes,
                         report_interval=report_interval,
                         public_key=signing.public_text(self.key), **newer)

    def report(self, manager, context, report):
        return self.call(manager, context, 'report', report=report)
