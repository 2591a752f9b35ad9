import numpy as np

from memcanal.estimation import logsim
from memcanal.estimation import traces


def test_tlb_misses_by_hand_and_across_calls():
    tlb = logsim.Tlb(entries=2)
    # distances: cold cold 2 cold 2 3 -> a 2-entry TLB misses cold and 3.
    assert tlb.misses([1, 2, 1, 3, 1, 2]).tolist() == [
        True, True, False, True, False, True]
    # It still holds 1 and 2 from the previous call.
    assert tlb.misses([1, 2, 3]).tolist() == [False, False, True]


def test_most_recent_distinct_is_oldest_first():
    assert logsim.most_recent_distinct(np.array([5, 1, 2, 1, 3, 1]),
                                       3).tolist() == [2, 3, 1]


def test_prl_misses_references_while_the_handler_runs():
    # Every reference misses the 1-entry TLB (distinct pages); 100 ns
    # apart; a 4-entry log whose handler takes 250 ns.
    log = logsim.PrlLog(tlb_entries=1, log_entries=4, handler_base_ns=250,
                        handler_entry_ns=0)
    trace = traces.Trace.of(np.arange(12), times=np.arange(12) * 100)
    delivered = log.feed(trace)
    # Full at t=300 (busy to 550: 400 and 500 missed), again at t=900
    # (1000 and 1100 missed).
    assert delivered.gpas.tolist() == [0, 1, 2, 3, 6, 7, 8, 9]
    stats = delivered.stats
    assert (stats.events, stats.logged, stats.missed) == (2, 8, 4)
    assert stats.missed_per_event == 2.0
    assert stats.handler_ns == 500 and stats.vm_cpu_ns == 0


def test_prl_logs_reads_and_repeats_but_not_tlb_hits():
    log = logsim.PrlLog(tlb_entries=2, log_entries=2)
    trace = traces.Trace.of([1, 1, 2, 3, 4, 1], times=np.arange(6) * 10 ** 6)
    # TLB misses: 1, 2, 3, 4, 1 (the second 1 hits): two full logs.
    assert log.feed(trace).gpas.tolist() == [1, 2, 3, 4]
    assert log.stats.logged == 5 and log.stats.events == 2


def test_pml_logs_first_writes_until_dirty_bits_clear():
    log = logsim.PmlLog(log_entries=4, handler_base_ns=1000,
                        handler_entry_ns=0)
    trace = traces.Trace.of([1, 1, 2, 3, 9, 2, 4, 5, 1],
                            writes=[1, 1, 1, 1, 0, 1, 1, 1, 1])
    delivered = log.feed(trace)
    # Dirtied in order 1 2 3 4 5; page 9 was only read.
    assert delivered.gpas.tolist() == [1, 2, 3, 4]
    assert delivered.stats.events == 1
    assert delivered.stats.vm_cpu_ns == 1000
    assert delivered.stats.missed == 0
    assert log.feed(trace).stats.logged == 0
    log.clear_dirty()
    # 5 waits in the log; 1 is logged again, 6 for the first time.
    again = log.feed(traces.Trace.of([1, 6, 7], writes=[1, 1, 1]))
    assert again.gpas.tolist() == [5, 1, 6, 7]
    assert log.stats.logged == 8 and log.stats.missed == 0


def test_logs_are_per_vcpu():
    log = logsim.PrlLog(tlb_entries=1, log_entries=2)
    trace = traces.Trace.of([1, 2, 3, 4, 5], times=np.arange(5) * 10 ** 6,
                            vcpus=[0, 0, 1, 0, 1])
    delivered = log.feed(trace)
    # vCPU 0 filled 2 of 3 entries (one event); vCPU 1 filled 2 (one).
    assert sorted(delivered.gpas.tolist()) == [1, 2, 3, 5]
    assert log.stats.events == 2 and log.stats.logged == 5


def test_cumulative_buffer_counts_and_grows():
    buffer = logsim.CumulativeBuffer()
    buffer.add(np.array([1, 1, 5]))
    buffer.add(np.array([40, 1]))
    assert buffer.counts[1] == 3 and buffer.counts[5] == 1
    assert buffer.counts[40] == 1
    assert buffer.pages_logged_at_least(2) == 1
    assert buffer.pages_logged() == 3
    buffer.reset()
    assert buffer.pages_logged() == 0


def test_flush_takes_partial_logs_without_an_event():
    log = logsim.PmlLog(log_entries=4)
    log.feed(traces.Trace.of([1, 2, 3, 4, 5, 6], writes=[1] * 6))
    assert log.flush().tolist() == [5, 6]
    assert log.flush().tolist() == []
    assert log.stats.events == 1
