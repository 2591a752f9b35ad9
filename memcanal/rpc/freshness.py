"""What makes a signed RPC message fresh, so that a captured one cannot
be played again.

A signature (memcanal.rpc.signing) says who sent a message, not when:
anyone who read it on the broker could send it again, and it would
verify. So since service RPC 1.10 and agent RPC 1.3 the sender adds, to
the arguments it signs, ``sent_at`` (its clock, UTC, ISO 8601 with
microseconds) and ``nonce`` (16 random bytes, base64): the signature
covers both, so neither can be changed.

The receiver takes a message only when ``sent_at`` is within ``[rpc]
replay_window`` seconds of its own clock, either way (clocks differ a
little; a message that waited in the queue longer than that is refused,
and sent again by whoever needs it answered: the agent's outbox, the
service's resending of unanswered actions), and when it has not seen
the sender's nonce within that window (Window). What a receiver
remembers of a message besides (a report's sequence, a registration's
time: memcanal.db) covers what outlives the window.

A message without them is from a sender of an older release; the
receiver takes it until that sender has sent it one with them
(doc/upgrades.md), as memcanal.service.manager and
memcanal.agent.manager say.
"""

import base64
import collections
import datetime
import secrets
import threading

from oslo_utils import timeutils

SENT_AT = 'sent_at'
NONCE = 'nonce'

# Why a message was refused (stable: recorded and counted).
STALE = 'rpc.stale'            # sent_at outside the window, or unreadable
REPLAYED = 'rpc.replayed'      # seen before: a nonce, a registration
UNSTAMPED = 'rpc.unstamped'    # no sent_at and nonce from a sender that
                               # has sent them before

NONCE_BYTES = 16
_FORMAT = '%Y-%m-%dT%H:%M:%S.%fZ'


def stamp(args, now=None):
    """``args`` with a ``sent_at`` of ``now`` (the clock's) and a fresh
    ``nonce``: sign the result."""
    when = now or timeutils.utcnow()
    return dict(args, **{
        SENT_AT: when.strftime(_FORMAT),
        NONCE: base64.b64encode(secrets.token_bytes(NONCE_BYTES)).decode()})


def stamped(args):
    """Whether the message of ``args`` carries freshness (either field:
    one without the other is refused by Window.check)."""
    return args.get(SENT_AT) is not None or args.get(NONCE) is not None


def sent_at(text):
    """``sent_at`` as a naive UTC datetime; ValueError if it is none."""
    if not isinstance(text, str) or len(text) > 40:
        raise ValueError('sent_at is not a time')
    return timeutils.normalize_time(timeutils.parse_isotime(text))


class Window:
    """Which stamped messages a receiver takes: sent within ``seconds``
    of its clock, with a nonce it has not seen from that sender while
    the message could still pass (nonces are forgotten once the time
    they came with leaves the window, so memory stays bounded by what
    senders send in a window)."""

    def __init__(self, seconds):
        self.seconds = seconds
        self._lock = threading.Lock()
        # (sender, nonce) -> until when it is remembered, in the order
        # they came.
        self._seen = collections.OrderedDict()

    def check(self, sender, args, now=None):
        """None if the stamped message of ``args`` (its keyword
        arguments) from ``sender`` is fresh, remembering its nonce; else
        (code, detail)."""
        now = now or timeutils.utcnow()
        nonce = args.get(NONCE)
        try:
            when = sent_at(args.get(SENT_AT))
        except ValueError:
            return STALE, 'its sent_at is not a time'
        if not isinstance(nonce, str) or not 16 <= len(nonce) <= 64:
            return STALE, 'it carries no nonce'
        age = (now - when).total_seconds()
        if abs(age) > self.seconds:
            return STALE, ('sent %.0f s %s, outside the %d s window '
                           '([rpc] replay_window)' % (
                               abs(age), 'ago' if age > 0 else 'ahead',
                               self.seconds))
        key = (sender, nonce)
        with self._lock:
            self._forget(now)
            if key in self._seen:
                return REPLAYED, ('its nonce came before (it was sent '
                                  '%.0f s ago)' % age)
            self._seen[key] = when + datetime.timedelta(seconds=self.seconds)
        return None

    def _forget(self, now):
        while self._seen:
            key, until = next(iter(self._seen.items()))
            if until >= now:
                return
            del self._seen[key]
