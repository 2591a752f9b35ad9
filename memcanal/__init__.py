"""memcanal: per-VM working sets and miss-ratio curves, acted on cloud-wide.

Importing any part of memcanal first selects oslo.service's threading
backend (see memcanal.threading_backend): a module's third-party imports,
oslo.messaging among them, run before its memcanal imports, so this is the
one place that always comes first.
"""

from memcanal import threading_backend  # noqa: F401
