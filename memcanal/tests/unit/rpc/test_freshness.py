"""The window a stamped message must be sent in, and its nonce seen once
(memcanal.rpc.freshness): what refuses replays."""

import datetime

from memcanal.rpc import freshness

T0 = datetime.datetime(2026, 12, 2, 9, 0)


def at(seconds):
    return T0 + datetime.timedelta(seconds=seconds)


def test_a_stamp_is_fresh_once_and_replayed_after():
    window = freshness.Window(300)
    args = freshness.stamp({'host': 'h1'}, now=T0)
    assert freshness.sent_at(args['sent_at']) == T0
    assert window.check('h1', args, now=at(1)) is None
    assert window.check('h1', args, now=at(2))[0] == freshness.REPLAYED
    # Another sender's message with the same nonce is another message.
    assert window.check('h2', args, now=at(2)) is None


def test_a_replay_outside_the_window_either_way_is_stale():
    window = freshness.Window(300)
    args = freshness.stamp({}, now=T0)
    code, detail = window.check('h1', args, now=at(301))
    assert code == freshness.STALE and '301 s ago' in detail
    code, detail = window.check('h1', args, now=at(-301))
    assert code == freshness.STALE and 'ahead' in detail
    assert window.check('h1', args, now=at(-299)) is None


def test_a_malformed_stamp_is_refused_as_stale():
    window = freshness.Window(300)
    args = freshness.stamp({}, now=T0)
    for bad in (dict(args, sent_at='yesterday'), dict(args, sent_at=5),
                dict(args, nonce=None), dict(args, nonce='short'),
                {'nonce': args['nonce']}):
        assert window.check('h1', bad, now=T0)[0] == freshness.STALE
    assert freshness.stamped({'nonce': 'x'})
    assert not freshness.stamped({'host': 'h1'})


def test_nonces_are_forgotten_once_their_replays_would_be_stale():
    window = freshness.Window(300)
    for second in range(5):
        window.check('h1', freshness.stamp({}, now=at(second)),
                     now=at(second))
    assert len(window._seen) == 5
    window.check('h1', freshness.stamp({}, now=at(400)), now=at(400))
    assert len(window._seen) == 1
