import os
import subprocess
import sys

from memcanal.conf import opts

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))


def test_every_group_is_listed_for_the_generator():
    groups = {str(group) for group, _opts in opts.list_opts()}
    assert {'DEFAULT', 'agent', 'api', 'database', 'estimation', 'service',
            'simulated'} <= groups


def test_oslo_config_generator_writes_a_sample(tmp_path):
    sample = tmp_path / 'memcanal.conf.sample'
    subprocess.run(
        [os.path.join(os.path.dirname(sys.executable),
                      'oslo-config-generator'),
         '--config-file',
         os.path.join(ROOT, 'etc/memcanal/memcanal-config-generator.conf'),
         '--output-file', str(sample)], check=True, capture_output=True)
    text = sample.read_text()
    for section in ('[agent]', '[api]', '[database]', '[estimation]',
                    '[service]', '[simulated]', '[keystone_authtoken]'):
        assert section in text
    assert '#report_interval = 60.0' in text
    assert '#mrc_methods = shards' in text
