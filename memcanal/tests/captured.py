"""Messages as memcanal's own RPC clients send them, taken off the wire:
what anyone holding the broker's credentials reads, and may send again
(the replays of issue #36)."""

from unittest import mock

from oslo_messaging.rpc import client as rpc_client

from memcanal import context as memcanal_context


def sent(api, method, *args, **kwargs):
    """The keyword arguments ``api`` (a ServiceAPI or an AgentAPI, on a
    transport) puts on the wire for ``method`` called with ``args`` and
    ``kwargs``: signed, and stamped where its version does. Nothing is
    sent (a call returns a mock)."""
    context = rpc_client._BaseCallContext
    with mock.patch.object(context, 'cast') as cast, \
            mock.patch.object(context, 'call') as call:
        getattr(api, method)(memcanal_context.get_admin_context(), *args,
                             **kwargs)
    [made] = cast.call_args_list + call.call_args_list
    assert made.args[1] == method
    return dict(made.kwargs)
