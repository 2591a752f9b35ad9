import os

from memcanal.agent import durable
from memcanal.agent import outbox


def report(sequence):
    return {'host_uuid': 'h', 'sequence': sequence, 'instances': []}


def test_reports_survive_a_restart_until_dropped(tmp_path):
    box = outbox.Outbox(str(tmp_path / 'box'), 10)
    for sequence in (1, 2, 3):
        box.add(report(sequence))
    box.drop([2, 7])
    again = outbox.Outbox(str(tmp_path / 'box'), 10)
    assert again.sequences() == [1, 3]
    assert again.load(3) == report(3)


def test_a_report_is_due_once_sent_long_enough_ago(tmp_path):
    box = outbox.Outbox(str(tmp_path), 10)
    box.add(report(1))
    box.add(report(2))
    box.sent(2)
    # Not sent (its cast failed): asked about at once.
    assert box.due(3600) == [1]
    assert box.due(0) == [1, 2]
    # A restarted agent asks about everything its outbox holds.
    assert outbox.Outbox(str(tmp_path), 10).due(3600) == [1, 2]


def test_the_oldest_reports_go_past_the_bound(tmp_path, caplog):
    box = outbox.Outbox(str(tmp_path), 3)
    for sequence in range(1, 6):
        box.add(report(sequence))
    assert box.sequences() == [3, 4, 5]
    assert sorted(os.listdir(tmp_path)) == ['3.json', '4.json', '5.json']
    assert 'dropping reports 2 to 2' in caplog.text
    # A smaller bound after a restart applies at once.
    assert outbox.Outbox(str(tmp_path), 1).sequences() == [5]


def test_an_interrupted_write_is_discarded(tmp_path):
    durable.write(str(tmp_path / '4.json'), '{"sequence": 4}')
    (tmp_path / '5.json.tmp').write_text('{"seq')
    assert outbox.Outbox(str(tmp_path), 10).sequences() == [4]
    assert not (tmp_path / '5.json.tmp').exists()
