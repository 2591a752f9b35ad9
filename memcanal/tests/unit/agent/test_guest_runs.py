from memcanal.agent import guest_runs

CONSOLE = """memcanal-guest: ready workload=RRWW:64:8
wsswork: size_mb=64 pages=16384 order=RRWW phase_s=8.0
wsswork: phase=RR start
wsswork: phase=RR passes=2976 ops=48758784 ns=6000518343 ops_per_us=8.126 sum=1
wsswork: phase=WW start
"""


def interval(phase, prl_rounds, pml_rounds, prl=None, pml=None, logs=None,
             seconds=1.0):
    wss = {name: value for name, value in (('prl', prl), ('pml', pml))
           if value is not None}
    return dict(phase=phase, prl_rounds=prl_rounds, pml_rounds=pml_rounds,
                seconds=seconds, sample=dict(wss=wss, logs=logs or {}))


def test_phase_and_throughputs_from_the_console(tmp_path):
    console = tmp_path / 'guest.console'
    console.write_text('booting\n')
    assert guest_runs.phase(str(console)) is None
    console.write_text(CONSOLE)
    assert guest_runs.phase(str(console)) == 'WW'
    console.write_text(CONSOLE + 'wsswork: done\n')
    assert guest_runs.phase(str(console)) == 'done'
    assert guest_runs.throughputs(CONSOLE) == [('RR', 8.126)]


def test_rounds_within_takes_rounds_that_began_and_ended_in_the_phases():
    intervals = [
        interval(None, 1, 0, prl=10),        # boot: round 1 converges
        interval('RR', 1, 1, prl=10, pml=90),
        interval('RR', 2, 1, prl=67, pml=90),   # began in boot: left out
        interval('RR', 2, 2, prl=67, pml=1),    # PML: began at 1, in RR
        interval('WW', 3, 2, prl=64, pml=1),    # PRL: began at 2, in RR
        interval('WW', 3, 3, prl=64, pml=64),
        interval('done', 4, 3, prl=60, pml=64),  # ended after: left out
    ]
    assert guest_runs.rounds_within(intervals, 'prl', ('RR', 'WW')) == [64]
    assert guest_runs.rounds_within(intervals, 'pml', ('RR',)) == [1]
    assert guest_runs.rounds_within(intervals, 'pml', ('RR', 'WW')) == [1,
                                                                        64]


def test_log_totals_sum_the_reports_in_the_phases():
    logs = {'prl': {'events': 2, 'missed': 1}}
    intervals = [interval(None, 0, 0, logs=logs, seconds=3),
                 interval('RR', 0, 0, logs=logs, seconds=1),
                 interval('WW', 0, 0, logs=logs, seconds=1)]
    assert guest_runs.log_totals(intervals, ('RR', 'WW')) == {
        'prl': {'events': 4, 'missed': 2}, 'seconds': 2}
    assert guest_runs.log_totals(intervals)['prl']['events'] == 6


def test_guest_files_names_what_is_missing(tmp_path):
    (tmp_path / 'vmlinux').write_bytes(b'')
    files, missing = guest_runs.guest_files(str(tmp_path))
    assert files['vmlinux'] == str(tmp_path / 'vmlinux')
    assert sorted(missing) == sorted(str(tmp_path / name) for name in (
        'vmlinuz', 'initramfs.gz', 'memtrace.so'))
