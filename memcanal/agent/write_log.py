"""A VM's working set and write curve from its hypervisor's write log.

Xen's log-dirty (driver.WriteLog) is what PML's estimator was built for,
with no log to emulate: every interval, the frames the guest wrote. The
PML estimator (memcanal.estimation.wss.PmlWss) gathers them over each
report interval (its mu) and takes its estimate once a report interval
adds no frame; Xen clears the log itself every interval, so there is no
dirty epoch to start. The same frames, in order, make the write curve:
the miss ratio of the VM's writes at each memory size, over the last
``[estimation] mrc_window`` report intervals, by the first of
``[estimation] mrc_methods``. The log's order within one interval is
lost (each interval is a set), so reuses are told apart at the
interval's grain.

Both are reported under ``<source>_logdirty`` (``xen_logdirty``), never
as ``pml``: an operator reading a report sees that they came from the
hypervisor's own log. No PRL or ESX estimate is made from a write log:
they would read its silence on reads as an idle VM.
"""

import numpy as np

from memcanal.estimation import mrc
from memcanal.estimation import wss


def name(source):
    """The working set's and the curve's key in a report."""
    return '%s_logdirty' % source


class WriteLogEstimators:
    """The estimators of one VM's write log."""

    def __init__(self, conf, memory_bytes, page_size, source):
        options = conf.estimation
        self.name = name(source)
        self.page_size = page_size
        self.max_mrc_points = conf.agent.max_mrc_points
        self.pml = wss.PmlWss(page_size)
        self.curve = mrc.WindowedCurve(
            options.mrc_methods[0], options.mrc_window, options.shards_rate,
            options.shards_max_pages, universe=memory_bytes // page_size)

    def collect(self, write_log):
        """{'wss': .., 'mrc': ..} after one report interval of the log.

        A collection that brought no interval (the log's helper was not
        running) is no interval of the estimator: it would read as one
        without writes and end the round.
        """
        if write_log.intervals:
            pages = np.concatenate([mrc.as_pages(interval)
                                    for interval in write_log.intervals])
            self.pml.handle(pages)
            self.pml.iterate()
            self.curve.add(pages)
        summary = {'wss': {}, 'mrc': {}}
        if self.pml.estimate is not None:
            summary['wss'][self.name] = int(self.pml.estimate)
        curve = self.curve.curve()
        if curve is not None:
            summary['mrc'][self.name] = curve.compact(self.max_mrc_points,
                                                      self.page_size)
        return summary
