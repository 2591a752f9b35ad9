import os
import stat

from memcanal.agent import journal


def action(uuid):
    return {'uuid': uuid, 'instance_uuid': 'vm', 'target_bytes': 4096,
            'mechanism': 'balloon'}


def test_journal_keeps_intents_and_outcomes_across_restarts(tmp_path):
    path = str(tmp_path / 'journal')
    book = journal.ActionJournal(path, 10)
    book.intend(action('a/1'), 8192)
    book.intend(action('b'), 8192)
    book.record(action('b'), 8192, {'uuid': 'b', 'state': 'applied'})
    again = journal.ActionJournal(path, 10)
    assert again.get('a/1') == {'action': action('a/1'),
                                'previous_bytes': 8192, 'result': None}
    assert again.get('b')['result'] == {'uuid': 'b', 'state': 'applied'}
    assert again.get('c') is None
    # An action uuid is a file name, never a path.
    assert sorted(os.listdir(path)) == ['a%2F1.json', 'b.json']


def test_journal_forgets_its_oldest_actions_past_the_bound(tmp_path):
    book = journal.ActionJournal(str(tmp_path), 2)
    for uuid in ('a', 'b', 'c'):
        book.intend(action(uuid), None)
    # Recording an outcome makes an action the newest.
    book.record(action('b'), None, {'uuid': 'b'})
    book.intend(action('d'), None)
    assert book.get('a') is None and book.get('c') is None
    assert sorted(os.listdir(tmp_path)) == ['b.json', 'd.json']
    assert journal.ActionJournal(str(tmp_path), 2).get('b')['result']


def test_the_journal_is_the_agents_alone(tmp_path):
    """It holds page actions' lease tokens."""
    path = tmp_path / 'journal'
    path.mkdir(mode=0o755)
    journal.ActionJournal(str(path), 2)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o700
