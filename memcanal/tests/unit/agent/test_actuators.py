import pytest

from memcanal.agent.drivers import actuators
from memcanal import exception

MIB = 2 ** 20
SECTION = actuators.SECTION_BYTES


def test_balloon_cannot_pass_boot_memory():
    balloon = actuators.Balloon(1024 * MIB)
    with pytest.raises(exception.ResizeFailed, match='booted with'):
        balloon.resize('vm', 512 * MIB, 1025 * MIB, loaded=False)
    assert balloon.resize('vm', 512 * MIB, 1024 * MIB, False) == (
        pytest.approx(4 * 0.055))


def test_balloon_fragments_until_fully_deflated():
    balloon = actuators.Balloon(1024 * MIB)
    for _ in range(3):
        balloon.resize('vm', 1024 * MIB, 896 * MIB, False)
        balloon.resize('vm', 896 * MIB, 960 * MIB, False)
    assert balloon.fragments == 3
    balloon.resize('vm', 960 * MIB, 1024 * MIB, False)
    assert balloon.fragments == 0


def test_loaded_removal_is_slower_and_hotplug_beats_balloon_there():
    idle = actuators.Balloon(1024 * MIB).resize('vm', 1024 * MIB,
                                                512 * MIB, False)
    loaded = actuators.Balloon(1024 * MIB).resize('vm', 1024 * MIB,
                                                  512 * MIB, True)
    assert idle == pytest.approx(4 * 0.056)
    assert loaded == pytest.approx(4 * idle)
    hotplug = actuators.Hotplug(1024 * MIB).resize('vm', 1024 * MIB,
                                                   512 * MIB, True)
    assert hotplug < loaded
    assert hotplug == pytest.approx(4 * 0.005 + 4 * 0.056 * 4 * 0.696)


def test_hotplug_adds_sections_and_onlines_offline_pages():
    hotplug = actuators.Hotplug(512 * MIB)
    assert hotplug.sections == 4
    # 200 MB more: two sections, 56 MB of them left offline.
    seconds = hotplug.resize('vm', 512 * MIB, 712 * MIB, False)
    assert hotplug.sections == 6
    assert seconds == pytest.approx(2 * 0.060 + 200 / 128 * 0.005)
    # A later small grow onlines the offline pages: no new section.
    small = hotplug.resize('vm', 712 * MIB, 760 * MIB, False)
    assert hotplug.sections == 6
    assert small == pytest.approx(48 / 128 * 0.005)
    assert small < 0.060


def test_hotplug_removes_empty_sections_without_fragments():
    hotplug = actuators.Hotplug(1024 * MIB)
    seconds = hotplug.resize('vm', 1024 * MIB, 700 * MIB, False)
    # 324 MB offline from the top: two sections empty and removed.
    assert hotplug.sections == 6
    assert seconds == pytest.approx(324 / 128 * 0.005 + 2 * 0.046)
    assert hotplug.fragments == 0
