import numpy as np
import pytest

from memcanal.agent.drivers import memtrace
from memcanal.tests.unit.agent import fake_memtrace

UUID = '9d2b6e1a-3c4f-4a5b-8c7d-1e2f3a4b5c6d'


@pytest.fixture
def plugin(short_tmp_path):
    return fake_memtrace.FakePlugin(short_tmp_path + '/guest.sock', UUID, 512)


@pytest.fixture
def connection(plugin, short_tmp_path):
    connection = memtrace.Connection(short_tmp_path + '/guest.sock')
    yield connection
    connection.close()


def test_hello_gives_the_plugins_configuration(connection):
    hello = connection.hello
    assert hello.uuid == UUID
    assert hello.memory_mb == 512
    assert (hello.log_entries, hello.tlb_entries, hello.page_size) == (
        4, 64, 4096)


def test_sync_returns_what_was_delivered_since_the_previous(plugin,
                                                            connection):
    plugin.send(fake_memtrace.record(memtrace.PRL, [1, 2, 3, 1]))
    plugin.send(fake_memtrace.record(memtrace.PML, [7, 8, 9, 10]))
    plugin.send(fake_memtrace.record(memtrace.PRL, [4, 4, 4, 4], vcpu=1))
    plugin.partial = [11, 12]
    plugin.counters.update(prl_events=2, prl_logged=8, prl_missed=3)
    first = connection.sync()
    assert first.prl.tolist() == [1, 2, 3, 1, 4, 4, 4, 4]
    assert first.pml.tolist() == [7, 8, 9, 10]
    assert first.pml_partial.tolist() == [11, 12]
    assert first.counters['prl_missed'] == 3
    assert first.prl.dtype == np.int64
    second = connection.sync()
    assert len(second.prl) == len(second.pml) == len(second.pml_partial) == 0
    assert plugin.commands == ['S', 'S']


def test_new_dirty_epoch_asks_the_plugin(plugin, connection):
    connection.new_dirty_epoch()
    assert connection.sync().counters['epochs'] == 1
    assert plugin.commands == ['C', 'S']


def test_after_the_guest_exits_sync_returns_the_last_logs(plugin,
                                                          connection):
    plugin.send(fake_memtrace.record(memtrace.PRL, [5, 6, 7, 8]))
    plugin.exit()
    last = connection.sync(timeout=5)
    assert last.prl.tolist() == [5, 6, 7, 8]
    assert connection.closed


def test_a_corrupt_stream_is_an_error(plugin, connection):
    plugin.send(b'\0' * memtrace.HEADER.size)
    with pytest.raises(memtrace.MemtraceError, match='magic'):
        connection.sync(timeout=5)


def test_a_plugin_that_does_not_answer_is_an_error(short_tmp_path):
    # A listener that accepts, says hello and then never answers.
    path = short_tmp_path + '/mute.sock'
    plugin = fake_memtrace.FakePlugin(path, UUID)
    connection = memtrace.Connection(path)
    plugin._consumer.shutdown(0)  # it no longer reads commands
    with pytest.raises(memtrace.MemtraceError, match='did not answer'):
        connection.sync(timeout=0.2)
    connection.close()


def test_no_plugin_on_the_path(short_tmp_path):
    with pytest.raises(memtrace.MemtraceError, match='no memtrace plugin'):
        memtrace.Connection(short_tmp_path + '/nothing.sock', timeout=0.1)
