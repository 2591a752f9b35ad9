"""memcanal.agent.settle: a resized VM's memory read back until it is at
its target or the timeout passes, on a fake clock."""

import pytest

from memcanal.agent import driver
from memcanal.agent import settle
from memcanal import exception

MIB = 2 ** 20


class Clock:
    """A clock that moves only when slept on."""

    def __init__(self):
        self.now = 0.0
        self.sleeps = []

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds


class Readings:
    """A driver whose VM's memory reads ``values`` in turn, the last one
    from then on (InstanceNotFound for an exception)."""

    def __init__(self, *values):
        self.values = list(values)
        self.asked = []

    def memory_now(self, uuid, mechanism):
        self.asked.append((uuid, mechanism))
        value = self.values.pop(0) if len(self.values) > 1 else self.values[0]
        if isinstance(value, Exception):
            raise value
        return value


@pytest.mark.parametrize('previous, target, reached, short', [
    (256, 160, 160, False),
    (256, 160, 161, False),           # within the tolerance
    (256, 160, 162, True),
    (256, 160, 100, False),           # a shrink past its target
    (128, 256, 254, True),
    (128, 256, 258, False),           # virtio-mem's whole blocks
    (128, 128, 127.5, False),
])
def test_short_of_a_change_is_behind_it_by_more_than_the_tolerance(
        previous, target, reached, short):
    assert settle.short_of(previous * MIB, target * MIB,
                           int(reached * MIB)) is short


def resize(previous_mib=256, target_mib=160):
    return driver.Resize('balloon', previous_mib * MIB, target_mib * MIB,
                         0.1)


def test_a_guest_at_its_target_is_read_once():
    clock = Clock()
    readings = Readings(160 * MIB)
    done = settle.settle(readings, 'vm', resize(), 30, clock.sleep, clock)
    assert (done.reached_bytes, done.lagged, done.settle_seconds) == (
        160 * MIB, False, 0.0)
    assert readings.asked == [('vm', 'balloon')]
    assert clock.sleeps == []


def test_a_guest_is_read_until_it_reaches_its_target():
    clock = Clock()
    done = settle.settle(Readings(256 * MIB, 200 * MIB, 160 * MIB), 'vm',
                         resize(), 30, clock.sleep, clock)
    assert (done.reached_bytes, done.lagged) == (160 * MIB, False)
    assert clock.sleeps == [settle.POLL_SECONDS] * 2
    assert done.settle_seconds == 2 * settle.POLL_SECONDS


def test_a_guest_still_short_at_the_timeout_lagged():
    clock = Clock()
    done = settle.settle(Readings(250 * MIB, 240 * MIB), 'vm', resize(), 1.2,
                         clock.sleep, clock)
    assert (done.reached_bytes, done.lagged) == (240 * MIB, True)
    assert done.settle_seconds == pytest.approx(1.2)
    assert sum(clock.sleeps) == pytest.approx(1.2)
    # What the hypervisor did is kept.
    assert (done.mechanism, done.previous_bytes, done.target_bytes,
            done.seconds) == ('balloon', 256 * MIB, 160 * MIB, 0.1)


def test_no_timeout_reads_once():
    clock = Clock()
    done = settle.settle(Readings(250 * MIB), 'vm', resize(), 0, clock.sleep,
                         clock)
    assert (done.reached_bytes, done.lagged, clock.sleeps) == (
        250 * MIB, True, [])


def test_a_vm_gone_before_it_is_read_back_reached_nothing_known():
    clock = Clock()
    done = settle.settle(Readings(exception.InstanceNotFound(uuid='vm')),
                         'vm', resize(), 30, clock.sleep, clock)
    assert (done.reached_bytes, done.lagged) == (None, None)
