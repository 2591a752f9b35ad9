"""Where the WSGI entry point reads its configuration."""

from memcanal import wsgi


def test_config_files_from_environment(tmp_path):
    assert wsgi.config_files({'OS_MEMCANAL_CONFIG_FILES':
                              '/a/one.conf; /b/two.conf;'}) == [
        '/a/one.conf', '/b/two.conf']


def test_default_config_file_only_if_present(monkeypatch, tmp_path):
    monkeypatch.setattr(wsgi, 'DEFAULT_CONFIG_FILE',
                        str(tmp_path / 'memcanal.conf'))
    assert wsgi.config_files({}) == []
    (tmp_path / 'memcanal.conf').write_text('[DEFAULT]\n')
    assert wsgi.config_files({}) == [str(tmp_path / 'memcanal.conf')]
    assert wsgi.config_files({'OS_MEMCANAL_CONFIG_FILES': ' '}) == [
        str(tmp_path / 'memcanal.conf')]
