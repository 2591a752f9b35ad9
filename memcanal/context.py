"""Request context carried through the API, RPC and the database layer."""

from oslo_context import context
from oslo_db.sqlalchemy import enginefacade


@enginefacade.transaction_context_provider
class RequestContext(context.RequestContext):
    """oslo.context's context, made usable as an oslo.db transaction holder."""

    @classmethod
    def from_dict(cls, values, **kwargs):
        return super().from_dict(values, **kwargs)


def get_admin_context():
    """A context for the service's own work (periodic tasks, ingestion)."""
    return RequestContext(is_admin=True, roles=['admin'],
                          overwrite=False)
