"""Exceptions shared across memcanal's layers."""


class MemcanalException(Exception):
    """Base class; ``msg_fmt`` is formatted with the keyword arguments."""

    msg_fmt = 'An unknown error occurred.'

    def __init__(self, message=None, **kwargs):
        self.kwargs = kwargs
        super().__init__(message or self.msg_fmt % kwargs)


class NotFound(MemcanalException):
    msg_fmt = 'Resource could not be found.'


class HostNotFound(NotFound):
    msg_fmt = 'Compute host %(host)s could not be found.'


class InstanceNotFound(NotFound):
    msg_fmt = 'Instance %(uuid)s could not be found.'


class MemoryServerNotFound(NotFound):
    msg_fmt = 'Memory server %(uuid)s could not be found.'


class HostKeyMismatch(MemcanalException):
    """A registration signed by another key than the one the host's
    agent first registered with (memcanal.rpc.signing)."""

    msg_fmt = ('Host %(host)s is registered with another key; if the host '
               'was rebuilt, run memcanal-manage host forget-key %(host)s.')


class MessageRefused(MemcanalException):
    """An RPC call the service refused: not signed by the key of the
    host it is from, or about another host (memcanal.rpc.signing)."""

    msg_fmt = 'The memcanal service refused the message: %(reason)s'


class StaleMessage(MemcanalException):
    """A signed message the receiver took before, or one like it
    (memcanal.rpc.freshness); ``code`` says which, stably."""

    msg_fmt = '%(reason)s'

    def __init__(self, code, reason):
        self.code = code
        super().__init__(reason=reason)


class MarkerNotFound(NotFound):
    msg_fmt = 'Marker %(marker)s could not be found.'


class InvalidReport(MemcanalException):
    """An agent report that fails validation; ``code`` says why, stably."""

    msg_fmt = 'Invalid report: %(reason)s'

    def __init__(self, code, reason):
        self.code = code
        super().__init__(reason=reason)


class DriverNotFound(MemcanalException):
    msg_fmt = 'Hypervisor driver %(name)s is not installed.'


class TracingNotSupported(MemcanalException):
    msg_fmt = ('The %(driver)s hypervisor driver cannot run a hypervisor '
               'cache.')


class MigrationFailed(MemcanalException):
    """A VM could not be moved to another host; it stays where it was."""

    msg_fmt = 'Could not migrate instance %(uuid)s to %(host)s: %(reason)s'


class ResizeFailed(MemcanalException):
    """A hypervisor could not give a VM the memory asked for; the VM keeps
    what it had."""

    msg_fmt = 'Could not resize instance %(uuid)s: %(reason)s'


class DecisionNotFound(NotFound):
    msg_fmt = 'Decision %(uuid)s could not be found.'


class DecisionSuperseded(MemcanalException):
    """Rolling back a decision that a newer one of its host changed
    since: undoing it would put back sizes the newer one moved on from,
    behind that one's back."""

    msg_fmt = ('Decision %(uuid)s was superseded by decision %(newer)s '
               '(%(newer_state)s); roll that one back first.')


class DecisionOfAnotherHost(MemcanalException):
    """An agent answering for actions the service sent to another host."""

    msg_fmt = ('Host %(host)s answered for decision %(uuid)s, whose '
               'actions were not sent to it.')


class HostBusy(MemcanalException):
    """Another decision of the host is being carried out."""

    msg_fmt = ('Decision %(busy)s of host %(host)s is being carried out; '
               'wait until it is done.')


class DecisionStateConflict(MemcanalException):
    """A decision asked to move to a state its current one does not lead
    to (approving a rejected decision, rolling back a pending one)."""

    msg_fmt = ('Decision %(uuid)s is %(state)s; it cannot be '
               '%(requested)s.')
