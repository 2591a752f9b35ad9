"""The configuration and policy samples in doc/sample/ are what the
generators write from the code now: an option or rule added without
running tools/generate-samples.sh fails here."""

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))


@pytest.mark.parametrize('generator, config_file, sample', [
    ('oslo-config-generator', 'memcanal-config-generator.conf',
     'memcanal.conf.sample'),
    ('oslopolicy-sample-generator', 'memcanal-policy-generator.conf',
     'policy.yaml.sample'),
])
def test_committed_sample_is_the_generators_output(tmp_path, generator,
                                                   config_file, sample):
    fresh = tmp_path / sample
    subprocess.run(
        [os.path.join(os.path.dirname(sys.executable), generator),
         '--config-file', os.path.join(ROOT, 'etc', 'memcanal', config_file),
         '--output-file', str(fresh)], check=True, capture_output=True)
    with open(os.path.join(ROOT, 'doc', 'sample', sample)) as committed:
        assert committed.read() == fresh.read_text(), (
            'doc/sample/%s is out of date: run tools/generate-samples.sh '
            'and commit it' % sample)
