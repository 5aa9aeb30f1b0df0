"""Use cases that span packages: refresh, daemon, purge, corrections, verify, the shared reader, the demo."""
