"""Working-set size estimators."""

import numpy as np


def distinct_pages(references):
    """Pages touched in the window: Denning's working set W(t, tau).

    Exact for the window the references cover; the estimators of later
    work (PRL, PML, sampling) are judged against it.
    """
    return int(np.unique(references).size)
