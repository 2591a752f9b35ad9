"""Tests against a real nova 34 and placement 16, in-process, in their
own venv (tools/install-nova.sh; tools/run-tests.sh runs them there).

nova's test package chooses eventlet or native threads when it is first
imported and, for native threads, refuses to start once eventlet was
imported. memcanal imports oslo.service, whose futurist imports eventlet
when it is installed (it is, in nova's venv): nova comes first, on
native threads, and this directory has its own pytest.ini and no
__init__.py so that pytest imports nothing of memcanal before this file.
"""

import os

os.environ['OS_NOVA_DISABLE_EVENTLET_PATCHING'] = '1'

import nova.tests.functional  # noqa: E402,F401
from nova import test  # noqa: E402

# nova deletes a test's attributes in its cleanup to free memory; pytest's
# unittest support still reads them afterwards.
test.TestCase._clear_attrs = lambda self: None
