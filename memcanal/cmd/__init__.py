"""Console scripts. Importing this package selects native threads."""

from memcanal import threading_backend  # noqa: F401
