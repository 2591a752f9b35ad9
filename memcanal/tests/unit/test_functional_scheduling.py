"""How the functional tests are shared between xdist's workers."""

import types

from memcanal.tests.functional import scheduling


def test_libvirtds_users_are_one_unit_others_their_module():
    unit = scheduling.unit_of
    assert unit('memcanal/tests/functional/test_nova_compute.py::test_a') \
        == unit('memcanal/tests/functional/test_libvirt.py::test_b[x]') \
        == 'libvirtd'
    assert unit('memcanal/tests/functional/test_aio.py::test_c') == \
        'test_aio'
    assert unit('memcanal/tests/unit/test_x.py::test_d') is None


def test_units_go_out_longest_first_libvirtd_together():
    names = ['memcanal/tests/unit/test_u.py::t',
             'memcanal/tests/functional/test_api.py::t',
             'memcanal/tests/functional/test_libvirt.py::t',
             'memcanal/tests/functional/test_aio.py::t',
             'memcanal/tests/functional/test_nova_compute.py::t']
    items = [types.SimpleNamespace(nodeid=name) for name in names]
    scheduling.pytest_collection_modifyitems(None, items)
    assert [item.nodeid for item in items] == [
        names[0], names[2], names[4], names[3], names[1]]


def test_the_scheduler_splits_by_unit():
    by_unit = scheduling.ByUnit.__new__(scheduling.ByUnit)
    assert by_unit._split_scope(
        'memcanal/tests/functional/test_libvirt_paging.py::t') == 'libvirtd'
    assert by_unit._split_scope('memcanal/tests/unit/test_u.py::t') == \
        'memcanal/tests/unit/test_u.py'
