"""Turn a driver's Sample into the estimates an agent reports."""

from memcanal.estimation import mrc
from memcanal.estimation import wss


def summarize(sample, max_mrc_points):
    """WSS by estimator and MRC by method for one VM's Sample.

    A sample without references (a driver that cannot see them) yields
    only its guest statistics.
    """
    if sample.references is None or sample.references.size == 0:
        return {'wss': {}, 'mrc': {}, 'guest_stats': sample.guest_stats}
    distinct = wss.distinct_pages(sample.references)
    sizes, ratios = mrc.miss_ratio_curve(sample.references)
    return {
        'wss': {'distinct': distinct * sample.page_size},
        'mrc': {'exact': mrc.compact(sizes, ratios, max_mrc_points,
                                     sample.page_size)},
        'guest_stats': sample.guest_stats,
    }
