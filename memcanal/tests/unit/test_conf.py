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


def test_a_misspelled_policy_stops_the_service_at_start(tmp_path):
    """It used to run U-tube on the aggregate, silently."""
    config = tmp_path / 'memcanal.conf'
    config.write_text('[DEFAULT]\ntransport_url = fake://\n'
                      '[optimizer]\naggregate_policies = db:isolated_sharin\n')
    done = subprocess.run(
        [os.path.join(os.path.dirname(sys.executable), 'memcanal-service'),
         '--config-file', str(config)],
        capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith('memcanal-service: configuration error:')
    assert "'isolated_sharin'" in last and 'isolated_sharing' in last
