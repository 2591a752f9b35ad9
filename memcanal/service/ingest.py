"""Group commit: the reports that arrive together are stored together.

The RPC server hands each report to a thread of its own (oslo.messaging's
``executor_thread_pool_size``, 64 by default). Each of those threads
validates its report, queues it here and waits; one of them stores what
is queued, up to ``[service] report_batch_size`` reports at a time, in
one transaction (``db_api.store_reports``), and hands every waiting
thread its own outcome. One transaction and a few multi-row INSERTs for
many reports cost little more than for one, so the more reports arrive
at once, the more each batch holds; a lone report is stored at once,
never delayed to wait for company.

Nothing is held back that the caller could lose: each caller returns
only once its report is committed (or refused), so it counts as stored
only what is. A crash loses what it always did: the reports the RPC
server had taken off the queue (oslo.messaging acknowledges a cast
before dispatching it) and not yet committed, at most one pool of
threads' worth. Agents that resend what the service has not confirmed
storing cover them.
"""

import collections
import concurrent.futures
import gc
import threading

from oslo_log import log as logging

from memcanal import context as memcanal_context
from memcanal.db import api as db_api

LOG = logging.getLogger(__name__)

# gc's thresholds for a process that ingests reports (Python's: 700, 10,
# 10); see collect_less.
GC_THRESHOLDS = (50000, 20, 100)


def collect_less():
    """Tune the cyclic garbage collector for ingesting reports.

    A decoded report is some two thousand small lists (its curves'
    points), and oslo.messaging decodes every report the broker delivers
    before a thread is free to store it. With Python's thresholds the
    collector then ran every few hundred allocations and, every so often,
    over every report still waiting: half of memcanal-service's CPU per
    report when reports arrive faster than they are stored. Objects made
    at start-up (modules, options) are frozen out of its reach, and
    collections are rarer; reports hold no reference cycles, so nothing
    waits longer to be freed.
    """
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


class ReportWriter:
    """Stores validated reports as ``db_api.store_report`` does, batched
    with whatever other threads are storing at the same time."""

    def __init__(self, batch_size):
        self.batch_size = batch_size
        self._lock = threading.Lock()
        self._pending = collections.deque()
        self._writing = False

    def store(self, report):
        """True once stored, False if already stored; raises HostNotFound,
        or the database's error, as db_api.store_report does.

        The caller that finds no transaction under way writes, batch
        after batch, until nothing is pending, its own report in the
        first batch; the others only wait for their outcome. So there is
        one transaction at a time per process (batches of one host would
        only queue behind its row lock, and SQLite has one writer
        anyway), no thread of its own to start or stop, and no report
        left pending with nobody writing.
        """
        future = concurrent.futures.Future()
        with self._lock:
            self._pending.append((report, future))
            lead = not self._writing
            self._writing = True
        if lead:
            self._write()
        return future.result()

    def _write(self):
        while True:
            with self._lock:
                batch = [self._pending.popleft() for _ in range(
                    min(self.batch_size, len(self._pending)))]
                if not batch:
                    self._writing = False
                    return
            self._store(batch)

    def _store(self, batch):
        context = memcanal_context.get_admin_context()
        if len(batch) > 1:
            try:
                outcomes = db_api.store_reports(
                    context, [report for report, _future in batch])
            except Exception:
                # One report the database refuses sinks its batch; alone,
                # each of the others is stored and it fails by itself.
                LOG.warning('A batch of %d reports failed; storing them '
                            'one by one', len(batch), exc_info=True)
            else:
                for (_report, future), outcome in zip(batch, outcomes):
                    if isinstance(outcome, Exception):
                        future.set_exception(outcome)
                    else:
                        future.set_result(outcome)
                return
        for report, future in batch:
            try:
                future.set_result(db_api.store_report(context, report))
            except Exception as err:
                future.set_exception(err)
