"""memcanal's tempest plugin: API tests run by ``tempest run`` against a
real cloud (doc/tempest.md)."""
