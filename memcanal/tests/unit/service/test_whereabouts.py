"""Where nova runs a VM (memcanal.service.whereabouts): asked only where
the service reaches nova, and no answer when nova gives none."""

from unittest import mock

from memcanal.service import whereabouts


def test_nova_is_asked_only_where_it_is_configured(conf):
    assert not whereabouts.NovaWhereabouts.configured(conf)
    conf.set_override('auth_type', 'password', 'nova')
    assert whereabouts.NovaWhereabouts.configured(conf)


def test_the_compute_host_nova_names_or_none(conf):
    connection = mock.Mock()
    connection.compute.get_server.return_value = mock.Mock(
        compute_host='compute-2')
    nova = whereabouts.NovaWhereabouts(conf, connection)
    assert nova.host_of('vm-1') == 'compute-2'
    connection.compute.get_server.assert_called_once_with('vm-1')
    # Gone, or nova down: no word, so the entry stays left out.
    connection.compute.get_server.side_effect = RuntimeError('404')
    assert nova.host_of('vm-1') is None
