"""How pytest-xdist shares the functional tests between its workers.

tools/run-tests.sh runs them two at a time with ``-p`` this plugin and
``--dist loadscope --no-loadscope-reorder``: each module is one unit of
work, on one worker (its module-scoped guests boot once), and the
modules that use the host's libvirtd are one unit between them, since
nova's compute node (test_nova_compute) restarts libvirtd and takes
every domain it finds for its own. The units go out longest first, so
that neither worker is left with a long one at the end.

The grouping is by node id rather than xdist's ``xdist_group`` mark:
xdist 3.8 writes the mark into ``Item._nodeid``, which pytest 9.2 no
longer reads.
"""

from xdist import scheduler

PACKAGE = 'memcanal/tests/functional/'
# Module names, not paths: the units of work.
SHARE_LIBVIRTD = frozenset([
    'test_handoff_attacks', 'test_libvirt', 'test_libvirt_paging',
    'test_libvirt_sampling', 'test_nova_compute', 'test_paging_carriers'])
# Minutes in a serial run, longest first; the rest follow in their
# collection order.
LONGEST_FIRST = ('libvirtd', 'test_xen', 'test_agent_paging', 'test_aio',
                 'test_memtrace', 'test_guest_paging', 'test_tempest',
                 'test_faults', 'test_osc')


def unit_of(nodeid):
    """The unit of work of the test ``nodeid``: its module's name,
    ``libvirtd`` for libvirtd's users; None outside the functional
    tests."""
    path = nodeid.split('::', 1)[0]
    if not path.startswith(PACKAGE):
        return None
    module = path[len(PACKAGE):].removesuffix('.py')
    return 'libvirtd' if module in SHARE_LIBVIRTD else module


class ByUnit(scheduler.LoadScopeScheduling):
    """xdist's scope scheduling with ``unit_of`` as the scope."""

    def _split_scope(self, nodeid):
        return unit_of(nodeid) or super()._split_scope(nodeid)


def pytest_xdist_make_scheduler(config, log):
    return ByUnit(config, log)


def pytest_collection_modifyitems(config, items):
    """Libvirtd's users together, then the longest units first."""
    def rank(item):
        unit = unit_of(item.nodeid)
        if unit is None:
            return -1
        return (LONGEST_FIRST.index(unit) if unit in LONGEST_FIRST
                else len(LONGEST_FIRST))
    items.sort(key=rank)
