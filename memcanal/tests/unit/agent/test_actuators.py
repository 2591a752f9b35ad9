import pytest

from memcanal.agent.drivers import actuators
from memcanal import exception

MIB = 2 ** 20
PAGES_PER_MIB = 256


def test_balloon_cannot_grow_past_boot_memory():
    balloon = actuators.Balloon(1024 * MIB, uuid='vm')
    assert balloon.resize(1024 * MIB, 512 * MIB, False) == pytest.approx(
        4 * 0.056)
    with pytest.raises(exception.ResizeFailed, match='booted with'):
        balloon.resize(512 * MIB, 1025 * MIB, False)
    # The failure changed nothing: all of it can still come back.
    assert balloon.held_pages == 512 * PAGES_PER_MIB
    assert balloon.resize(512 * MIB, 1024 * MIB, False) == pytest.approx(
        4 * 0.055)
    assert (balloon.held_pages, balloon.holes) == (0, 0)


def test_balloon_gives_back_only_what_it_took():
    # Memory hotplug removed (the VM is at 512 MB without the balloon
    # holding any of it): the balloon has nothing to deflate.
    balloon = actuators.Balloon(1024 * MIB, uuid='vm')
    with pytest.raises(exception.ResizeFailed, match='holds only 0 bytes'):
        balloon.resize(512 * MIB, 640 * MIB, False)


def cycles(actuator, count, boot=1024 * MIB):
    """Shrink by 128 MB and grow back 64 MB, ``count`` times; the holes
    after each cycle."""
    memory, holes = boot, []
    for _ in range(count):
        actuator.resize(memory, memory - 128 * MIB, False)
        actuator.resize(memory - 128 * MIB, memory - 64 * MIB, False)
        memory -= 64 * MIB
        holes.append(actuator.holes)
    return holes


def test_balloon_cycles_fragment_the_guest_and_hotplug_cycles_do_not():
    holes = cycles(actuators.Balloon(1024 * MIB), 4)
    assert holes[0] > 1000
    assert holes == sorted(holes) and holes[-1] > 2 * holes[0]
    hotplug = actuators.Hotplug(1024 * MIB)
    assert cycles(hotplug, 4) == [0] * 4
    # What was offlined went with its sections: 768 MB online, in six.
    assert hotplug.online_pages == 768 * PAGES_PER_MIB
    assert (hotplug.sections, hotplug.offline_pages) == (6, 0)


def test_balloon_deflates_the_newest_pages_first():
    balloon = actuators.Balloon(64 * MIB)
    balloon.resize(64 * MIB, 60 * MIB, False)
    first = balloon.holes
    balloon.resize(60 * MIB, 48 * MIB, False)
    balloon.resize(48 * MIB, 60 * MIB, False)
    assert balloon.holes == first


def test_hotplug_adds_whole_sections_past_boot_memory():
    hotplug = actuators.Hotplug(512 * MIB)
    assert (hotplug.sections, hotplug.offline_pages) == (4, 0)
    # 384 MB more: three sections at 60 ms each.
    assert hotplug.resize(512 * MIB, 896 * MIB, False) == pytest.approx(
        3 * 0.060)
    assert (hotplug.sections, hotplug.offline_pages) == (7, 0)


def test_a_partial_section_leaves_offline_pages_a_small_grow_onlines():
    hotplug = actuators.Hotplug(64 * MIB)
    # 64 MB of boot memory: one partial section.
    assert hotplug.sections == 1
    # 136 MB more: the boot section has no room, so two new sections,
    # 120 MB of them left offline (U-tube's 200 MB example).
    assert hotplug.resize(64 * MIB, 200 * MIB, False) == pytest.approx(
        2 * 0.060)
    assert hotplug.sections == 3
    assert hotplug.offline_pages == 120 * PAGES_PER_MIB
    # Onlining 32 MB of them adds no section, and is much cheaper.
    small = hotplug.resize(200 * MIB, 232 * MIB, False)
    assert hotplug.sections == 3
    assert hotplug.offline_pages == 88 * PAGES_PER_MIB
    assert small == pytest.approx(32 / 128 * 0.005)
    assert small < 0.060 / 10
    # Offline pages first, then a section for the rest.
    assert hotplug.resize(232 * MIB, 400 * MIB, False) == pytest.approx(
        88 / 128 * 0.005 + 0.060)
    assert (hotplug.sections, hotplug.offline_pages) == (4, 48 * PAGES_PER_MIB)


def test_hotplug_removes_a_section_once_all_its_pages_are_offline():
    hotplug = actuators.Hotplug(1024 * MIB)
    # 324 MB offline from the top: two whole sections are removed, and
    # 68 MB of the next only offlined.
    seconds = hotplug.resize(1024 * MIB, 700 * MIB, False)
    assert hotplug.sections == 6
    assert hotplug.offline_pages == 68 * PAGES_PER_MIB
    assert seconds == pytest.approx(2 * 0.046 + 68 / 128 * 0.005)
    # The other 60 MB of that section: it goes.
    seconds = hotplug.resize(700 * MIB, 640 * MIB, False)
    assert (hotplug.sections, hotplug.offline_pages) == (5, 0)
    assert seconds == pytest.approx(0.046)


def test_removal_latencies_idle_and_loaded():
    def removal(actuator, loaded):
        return actuator.resize(1024 * MIB, 512 * MIB, loaded)

    balloon_idle = removal(actuators.Balloon(1024 * MIB), False)
    balloon_loaded = removal(actuators.Balloon(1024 * MIB), True)
    hotplug_idle = removal(actuators.Hotplug(1024 * MIB), False)
    hotplug_loaded = removal(actuators.Hotplug(1024 * MIB), True)
    # Fig. 5: 56 ms per 128 MB and 46 ms per section from an idle VM.
    assert balloon_idle == pytest.approx(4 * 0.056)
    assert hotplug_idle == pytest.approx(4 * 0.046)
    # Loaded: ballooning 4 times slower, hotplug 30.4 % less than it.
    assert balloon_loaded == pytest.approx(4 * balloon_idle)
    assert hotplug_loaded == pytest.approx(0.696 * balloon_loaded)
    assert hotplug_idle < hotplug_loaded < balloon_loaded


def test_a_loaded_page_granular_removal_is_slower_than_an_idle_one():
    idle = actuators.Hotplug(1024 * MIB).resize(1024 * MIB, 1000 * MIB,
                                                False)
    loaded = actuators.Hotplug(1024 * MIB).resize(1024 * MIB, 1000 * MIB,
                                                  True)
    assert idle == pytest.approx(24 / 128 * 0.005)
    assert loaded > 10 * idle


def test_page_granular_online_is_much_faster_than_a_section_add():
    hotplug = actuators.Hotplug(1024 * MIB)
    hotplug.resize(1024 * MIB, 896 * MIB, False)
    hotplug.resize(896 * MIB, 768 * MIB, False)
    # Removed: the sections went, so adding back hot-adds one.
    assert hotplug.resize(768 * MIB, 896 * MIB, False) == pytest.approx(
        0.060)
    # Offlined only: onlining 127 MB of a plugged section.
    hotplug.resize(896 * MIB, 769 * MIB, False)
    online = hotplug.resize(769 * MIB, 896 * MIB, False)
    assert online == pytest.approx(127 / 128 * 0.005)
    assert online < 0.060 / 10
    # Fig. 3: balloon deflation, 55 ms per 128 MB.
    balloon = actuators.Balloon(1024 * MIB)
    balloon.resize(1024 * MIB, 768 * MIB, False)
    assert balloon.resize(768 * MIB, 1024 * MIB, False) == pytest.approx(
        2 * 0.055)
