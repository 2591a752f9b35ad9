#!/bin/sh
# Regenerate the configuration and policy samples in doc/sample/ from the
# options and policy defaults in code: run it after adding or changing
# either (memcanal/tests/unit/test_samples.py fails until you do).
# The generators come from the venv (VENV, default .venv); the output
# paths are in etc/memcanal/*-generator.conf, relative to the checkout.
set -e
cd "$(dirname "$0")/.."
bin=${VENV:-.venv}/bin
"$bin/oslo-config-generator" \
    --config-file etc/memcanal/memcanal-config-generator.conf
"$bin/oslopolicy-sample-generator" \
    --config-file etc/memcanal/memcanal-policy-generator.conf
echo "Wrote doc/sample/memcanal.conf.sample and doc/sample/policy.yaml.sample"
