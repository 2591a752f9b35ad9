"""Select oslo.service's threading backend before anything asks for one.

oslo.messaging asks oslo.service for a backend when it is imported, and
oslo.service still defaults to eventlet. memcanal runs on native threads,
so memcanal/__init__.py imports this module before anything else.
"""

import warnings

from oslo_service import backend
from oslo_service.backend import exceptions

# futurist imports eventlet only to detect it (oslo.service installs it);
# nothing monkey-patches, so its deprecation warning is noise here.
warnings.filterwarnings('ignore', message=r'\s*Eventlet is deprecated')

try:
    backend.init_backend(backend.BackendType.THREADING)
except exceptions.BackendAlreadySelected:
    # Only tools that load memcanal as a plugin after oslo.service chose
    # for them get here (oslo-config-generator); memcanal's own processes
    # import memcanal first, which tests check.
    warnings.warn('oslo.service backend already selected: %s'
                  % backend.get_backend_type())
