"""memcanal's console scripts."""
