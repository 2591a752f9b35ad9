from memcanal.agent import sequence


def test_numbers_increase_and_persist(tmp_path):
    path = str(tmp_path / 'sub' / 'seq')
    counter = sequence.SequenceCounter(path)
    assert [counter.next() for _ in range(3)] == [1, 2, 3]
    assert sequence.SequenceCounter(path).next() == 4


def test_resume_never_goes_back(tmp_path):
    counter = sequence.SequenceCounter(str(tmp_path / 'seq'))
    counter.resume_after(10)
    counter.resume_after(5)
    assert counter.next() == 11
